package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestInstanceManagersAreListedAsLonghornsAPIShowsThem(t *testing.T) {
	im := &longhorn.InstanceManager{
		ObjectMeta: metav1.ObjectMeta{Name: "instance-manager-abc", Namespace: testNamespace},
		Spec:       longhorn.InstanceManagerSpec{NodeID: "node-1", Image: "longhorn-manager:v2", Type: longhorn.InstanceManagerTypeAllInOne, DataEngine: longhorn.DataEngineTypeV1},
		Status: longhorn.InstanceManagerStatus{CurrentState: longhorn.InstanceManagerStateRunning, IP: "10.244.0.7",
			InstanceEngines: map[string]longhorn.InstanceProcess{"vol-e-0": {
				Spec:   longhorn.InstanceProcessSpec{Name: "vol-e-0", VolumeName: "vol"},
				Status: longhorn.InstanceProcessStatus{State: longhorn.InstanceStateRunning, ID: "id-1", Endpoint: "nbd://127.0.0.1:10000"}}}},
	}
	s := newTestServer(t, im)
	get := func(path string) (int, map[string]any) {
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]any
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		return rec.Code, body
	}
	code, list := get("/v1/instancemanagers")
	data, _ := list["data"].([]any)
	if code != http.StatusOK || len(data) != 1 {
		t.Fatalf("list: %d %v", code, list)
	}
	got := data[0].(map[string]any)
	if got["name"] != "instance-manager-abc" || got["nodeID"] != "node-1" || got["currentState"] != "running" ||
		got["managerType"] != "aio" || got["image"] != "longhorn-manager:v2" || got["type"] != "instanceManager" {
		t.Fatalf("listed as %v", got)
	}
	engine := got["instanceEngines"].(map[string]any)["vol-e-0"].(map[string]any)
	if engine["spec"].(map[string]any)["volumeName"] != "vol" || engine["status"].(map[string]any)["state"] != "running" {
		t.Fatalf("its engine: %v", engine)
	}
	if replicas, ok := got["instanceReplicas"].(map[string]any); !ok || len(replicas) != 0 {
		t.Fatalf("instanceReplicas must be an empty map, as the UI reads it: %v", got["instanceReplicas"])
	}
	if code, _ := get("/v1/instancemanagers/instance-manager-abc"); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	if code, _ := get("/v1/instancemanagers/none"); code != http.StatusNotFound {
		t.Fatalf("get of none: %d, want 404", code)
	}
}
