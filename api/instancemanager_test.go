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

// TestEngineImagesSayWhichVolumesRunAnOlderOne: each image an instance
// manager runs is an engine image, the manager's own the default, with
// the engines that run it counted; a volume attached in an older one
// shows that image as its current one, and as its image (no upgrade is
// under way: it moves at its next attach), so the UI offers snapshots and
// marks it "upgrade available".
func TestEngineImagesSayWhichVolumesRunAnOlderOne(t *testing.T) {
	im := func(name, node, image string) *longhorn.InstanceManager {
		return &longhorn.InstanceManager{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec: longhorn.InstanceManagerSpec{NodeID: node, Image: image, Type: longhorn.InstanceManagerTypeAllInOne}}
	}
	engine := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0", Namespace: testNamespace, Labels: map[string]string{"longhornvolume": "vol"}},
		Spec:   longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol", NodeID: "node-1"}},
		Status: longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: longhorn.InstanceStateRunning, CurrentImage: "longhorn-manager:v1"}}}
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace},
		Spec:   longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1, NodeID: "node-1"},
		Status: longhorn.VolumeStatus{State: longhorn.VolumeStateAttached, CurrentNodeID: "node-1", CurrentImage: "longhorn-manager:v1"}}
	s := newTestServer(t, im("im-v1", "node-1", "longhorn-manager:v1"), im("im-v2", "node-1", "longhorn-manager:v2"),
		im("im-v2b", "node-2", "longhorn-manager:v2"), engine, vol)
	s.server.SetEngineImage("longhorn-manager:v2")
	eventually(t, "the objects in the cache", func() bool {
		list, _ := s.server.ds.ListEnginesRO()
		ims, _ := s.server.ds.ListInstanceManagersRO()
		_, err := s.server.ds.GetVolumeRO("vol")
		return len(list) == 1 && len(ims) == 3 && err == nil
	})
	code, body, raw := s.do(t, "GET", "/v1/engineimages", "")
	data, _ := body["data"].([]any)
	if code != http.StatusOK || len(data) != 2 {
		t.Fatalf("engine images: %d %s", code, raw)
	}
	byImage := map[string]map[string]any{}
	for _, d := range data {
		ei := d.(map[string]any)
		byImage[ei["image"].(string)] = ei
	}
	v1, v2 := byImage["longhorn-manager:v1"], byImage["longhorn-manager:v2"]
	if v1 == nil || v2 == nil || v1["default"] != false || v2["default"] != true || v1["refCount"] != float64(1) || v2["refCount"] != float64(0) {
		t.Fatalf("engine images: %s", raw)
	}
	if nodes := v2["nodeDeploymentMap"].(map[string]any); len(nodes) != 2 || nodes["node-2"] != true {
		t.Fatalf("v2 is deployed on %v, want both nodes", nodes)
	}
	if code, _, _ := s.do(t, "GET", "/v1/engineimages/"+v1["name"].(string), ""); code != http.StatusOK {
		t.Fatalf("get v1: %d", code)
	}
	if code, _, _ := s.do(t, "GET", "/v1/engineimages/ei-none", ""); code != http.StatusNotFound {
		t.Fatalf("get of none: %d, want 404", code)
	}
	_, got, raw := s.do(t, "GET", "/v1/volumes/vol", "")
	if got["currentImage"] != "longhorn-manager:v1" || got["image"] != "longhorn-manager:v1" {
		t.Fatalf("volume's images: %s", raw)
	}
}
