package api

import (
	"net/http"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A full drill's scratch volume is not in the users' volume list; GET by
// name still answers it.
func TestTheVolumeListLeavesOutDrillScratchVolumes(t *testing.T) {
	s := newTestServer(t,
		&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: testNamespace}},
		&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-0123456789ab", Namespace: testNamespace,
			Labels: map[string]string{types.LabelBackupVerifyScratch: "b1"}}})
	status, body, raw := s.do(t, "GET", "/v1/volumes", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/volumes: %d %s", status, raw)
	}
	data := body["data"].([]any)
	if len(data) != 1 || data[0].(map[string]any)["name"] != "db" {
		t.Fatalf("the volume list: %s", raw)
	}
	if status, _, raw := s.do(t, "GET", "/v1/volumes/drill-0123456789ab", ""); status != http.StatusOK {
		t.Fatalf("GET the scratch volume: %d %s", status, raw)
	}
}
