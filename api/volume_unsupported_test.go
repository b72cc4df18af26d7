package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A Longhorn volume action the manager does not do answers 422 naming the
// action and the reason, and the volume never offers it; an action
// Longhorn does not have either stays a 400.
func TestUnsupportedVolumeActions(t *testing.T) {
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}, Status: longhorn.VolumeStatus{State: longhorn.VolumeStateAttached}}
	s := newTestServer(t, vol)
	eventually(t, "the volume in the cache", func() bool { code, _, _ := s.do(t, "GET", "/v1/volumes/vol", ""); return code == http.StatusOK })
	_, body, _ := s.do(t, "GET", "/v1/volumes/vol", "")
	offered := body["actions"].(map[string]interface{})
	for action, reason := range unsupportedVolumeActions {
		if _, ok := offered[action]; ok {
			t.Errorf("the volume offers %s, which the manager does not do", action)
		}
		code, out, raw := s.do(t, "POST", "/v1/volumes/vol?action="+action, `{}`)
		want := "volume action " + action + " is not supported by this manager: " + reason
		if code != http.StatusUnprocessableEntity || out["message"] != want || out["type"] != "error" {
			t.Errorf("%s: %d %s, want 422 %q", action, code, raw, want)
		}
	}
	if code, _, raw := s.do(t, "POST", "/v1/volumes/vol?action=fly", `{}`); code != http.StatusBadRequest || !strings.Contains(raw, `\"fly\" is not a volume action`) {
		t.Errorf("an unknown action: %d %s", code, raw)
	}
}

// Cloning (Longhorn's dataSource) is refused, not ignored: ignoring it
// would create an empty volume the UI reports as the clone.
func TestCreateVolumeRefusesDataSource(t *testing.T) {
	s := newTestServer(t)
	for _, src := range []string{"vol://src", "snap://src/snap-1"} {
		code, out, raw := s.do(t, "POST", "/v1/volumes", `{"name":"clone","size":"1Gi","numberOfReplicas":1,"dataSource":"`+src+`"}`)
		if code != http.StatusUnprocessableEntity || !strings.HasPrefix(out["message"].(string), "dataSource (cloning a volume) is not supported by this manager: ") || !strings.Contains(raw, src) {
			t.Errorf("dataSource %s: %d %s", src, code, raw)
		}
	}
	if _, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Get(context.Background(), "clone", metav1.GetOptions{}); err == nil {
		t.Error("a volume was created for a refused clone")
	}
	if code, _, raw := s.do(t, "POST", "/v1/volumes", `{"name":"plain","size":"1Gi","numberOfReplicas":1,"dataSource":""}`); code != http.StatusOK {
		t.Errorf("an empty dataSource: %d %s", code, raw)
	}
}
