package api

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A Longhorn volume action the manager does not do answers 422 naming the
// action and the reason, and the volume offers it only where Longhorn's UI
// shows its item whatever the volume offers (refusedButOffered); an action
// Longhorn does not have either stays a 400.
func TestUnsupportedVolumeActions(t *testing.T) {
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}, Status: longhorn.VolumeStatus{State: longhorn.VolumeStateAttached}}
	s := newTestServer(t, vol)
	eventually(t, "the volume in the cache", func() bool { _, err := s.server.ds.GetVolumeRO("vol"); return err == nil })
	_, body, _ := s.do(t, "GET", "/v1/volumes/vol", "")
	offered := body["actions"].(map[string]any)
	listed := map[string]bool{}
	for _, a := range refusedButOffered {
		listed[a] = true
	}
	for action, reason := range unsupportedVolumeActions {
		if _, ok := offered[action]; ok != listed[action] {
			t.Errorf("the volume offers %s: %v, want %v", action, ok, listed[action])
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
