package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestCheckOrigin(t *testing.T) {
	s := &Server{}
	s.SetAllowedOrigins([]string{"https://longhorn.example.com/"})
	for _, tc := range []struct {
		name, host, origin, forwarded string
		ok                            bool
	}{
		{"no Origin: not a browser", "127.0.0.1:9500", "", "", true},
		{"the manager's own page", "127.0.0.1:9500", "http://127.0.0.1:9500", "", true},
		{"localhost", "localhost:9500", "http://localhost:9500", "", true},
		{"a cross-site page", "127.0.0.1:9500", "http://evil.example", "", false},
		{"DNS rebinding: a public name pointing at the manager", "evil.example:9500", "http://evil.example:9500", "", false},
		{"the UI behind its proxy", "longhorn-backend:9500", "http://127.0.0.1:8000", "127.0.0.1:8000", true},
		{"the UI through a port-forward of its Service", "longhorn-backend:9500", "http://localhost:8000", "localhost:8000", true},
		// A tenant's Ingress can serve a cluster-internal name too
		// (through an ExternalName Service to the UI): it is trusted only
		// when given to --api-allowed-hosts or --allowed-origins.
		{"the UI by its cluster name, not named", "longhorn-backend:9500", "http://longhorn-frontend.longhorn-system.svc", "longhorn-frontend.longhorn-system.svc", false},
		{"a single-label name", "longhorn-backend:9500", "http://longhorn", "longhorn", false},
		{"a .localhost name", "longhorn-backend:9500", "http://ui.localhost:8000", "ui.localhost:8000", true},
		{"a cross-site page through the proxy", "longhorn-backend:9500", "http://evil.example", "127.0.0.1:8000", false},
		{"DNS rebinding through the proxy", "longhorn-backend:9500", "http://evil.example", "evil.example", false},
		{"a public name without --allowed-origins", "longhorn-backend:9500", "https://ui.example.org", "ui.example.org", false},
		{"a public name in --allowed-origins", "longhorn-backend:9500", "https://longhorn.example.com", "longhorn.example.com", true},
		{"a forwarded chain: the browser's host first", "longhorn-backend:9500", "http://10.0.0.5:8000", "10.0.0.5:8000, 10.0.0.9", true},
		{"an Origin that is not a URL", "127.0.0.1:9500", "null", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/ws/volumes", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			if tc.forwarded != "" {
				r.Header.Set("X-Forwarded-Host", tc.forwarded)
			}
			if got := s.checkOrigin(r); got != tc.ok {
				t.Errorf("checkOrigin = %v, want %v", got, tc.ok)
			}
		})
	}
}

func TestLinksFollowTheProxy(t *testing.T) {
	s := newTestServer(t)
	_, body, _ := s.do(t, "GET", "/v1/settings/v1-data-engine", "", "X-Forwarded-Host", "ui.local:8000", "X-Forwarded-Proto", "https")
	if self := body["links"].(map[string]any)["self"]; self != "https://ui.local:8000/v1/settings/v1-data-engine" {
		t.Errorf("self link %v", self)
	}
	_, body, _ = s.do(t, "GET", "/v1/settings/v1-data-engine", "", "X-Forwarded-Host", "evil/x")
	if self := body["links"].(map[string]any)["self"].(string); strings.Contains(self, "evil") {
		t.Errorf("a forwarded host that is not a host reached the link: %v", self)
	}
}

// TestUIEndpoints: what Longhorn's UI lists on every page answers a valid
// collection, and its streams stay open with one.
func TestUIEndpoints(t *testing.T) {
	s := newTestServer(t,
		&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace},
			Spec: longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1, NodeID: "node-1"},
			Status: longhorn.VolumeStatus{State: longhorn.VolumeStateAttached, CurrentNodeID: "node-1", Robustness: longhorn.VolumeRobustnessHealthy,
				Conditions: []longhorn.Condition{{Type: "Scheduled", Status: longhorn.ConditionStatusTrue}}}},
		&longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: testNamespace},
			Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: "Ready", Status: longhorn.ConditionStatusTrue}}}},
	)
	for path, resourceType := range map[string]string{
		"/v1/events": "event", "/v1/backuptargets": "backupTarget", "/v1/volumeattachments": "volumeAttachment",
		"/v1/engineimages": "engineImage", "/v1/systembackups": "systemBackup", "/v1/orphans": "orphan",
	} {
		code, body, raw := s.do(t, "GET", path, "")
		if code != 200 || body["type"] != "collection" || body["resourceType"] != resourceType {
			t.Errorf("GET %s: %d %s", path, code, raw)
		}
	}
	eventually(t, "the volume in the cache", func() bool { _, err := s.server.ds.GetVolumeRO("vol"); return err == nil })
	_, vol, raw := s.do(t, "GET", "/v1/volumes/vol", "")
	if vol["conditions"].(map[string]any)["Scheduled"].(map[string]any)["status"] != "True" {
		t.Errorf("volume conditions are not keyed by type: %s", raw)
	}
	for _, field := range []string{"controllers", "replicas", "backupStatus", "kubernetesStatus", "created", "dataEngine", "ready", "volumeAttachment", "disableFrontend", "currentImage"} {
		if _, ok := vol[field]; !ok {
			t.Errorf("volume lacks %s: %s", field, raw)
		}
	}
	if vol["dataEngine"] != "v1" || vol["ready"] != true || vol["kubernetesStatus"].(map[string]any)["workloadsStatus"] == nil {
		t.Errorf("volume %s", raw)
	}
	att := vol["volumeAttachment"].(map[string]any)["attachments"].(map[string]any)
	if len(att) != 1 || att["longhorn-api"].(map[string]any)["nodeID"] != "node-1" {
		t.Errorf("attachments %v", att)
	}
	_, node, raw := s.do(t, "GET", "/v1/nodes/node-1", "")
	if node["conditions"].(map[string]any)["Ready"].(map[string]any)["status"] != "True" {
		t.Errorf("node conditions are not keyed by type: %s", raw)
	}
	code, _, raw := s.do(t, "POST", "/v1/volumes/vol?action=snapshotCRList", "")
	if code != 200 || !strings.Contains(raw, `"resourceType":"snapshotCR"`) {
		t.Errorf("snapshotCRList: %d %s", code, raw)
	}
	code, _, raw = s.do(t, "POST", "/v1/volumes/vol?action=snapshotCRGet", `{"name":"nope"}`)
	if code != 404 {
		t.Errorf("snapshotCRGet of a missing snapshot: %d %s", code, raw)
	}

	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	for _, stream := range []string{"events", "backuptargets", "volumeattachments", "engineimages", "backupbackingimages", "backupvolumes", "backups", "systembackups", "systemrestores"} {
		header := http.Header{"Origin": {srv.URL}}
		conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws/1s/"+stream, header)
		if err != nil {
			t.Errorf("stream %s: %v", stream, err)
			continue
		}
		var msg map[string]any
		if err := conn.ReadJSON(&msg); err != nil || msg["type"] != "collection" || msg["resourceType"] == "" {
			t.Errorf("stream %s: %v %v", stream, msg, err)
		}
		conn.Close()
	}
	// A page of another site cannot open a stream.
	if _, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws/volumes", http.Header{"Origin": {"http://evil.example"}}); err == nil || resp == nil || resp.StatusCode != 403 {
		t.Errorf("a cross-site stream was not refused: %v", err)
	}
}

// TestVolumeCreateLikeLonghornClients: Longhorn's python client and UI
// send fields the project has no concept of, and always dataEngine.
func TestVolumeCreateLikeLonghornClients(t *testing.T) {
	s := newTestServer(t)
	body := `{"name":"py","size":"1073741824","numberOfReplicas":1,"frontend":"blockdev","dataEngine":"v1","accessMode":"rwo",
		"staleReplicaTimeout":20,"dataLocality":"disabled","encrypted":false,"nodeSelector":[],"diskSelector":[],"snapshotDataIntegrity":"ignored",
		"revisionCounterDisabled":false,"unmapMarkSnapChainRemoved":"ignored","replicaAutoBalance":"ignored","backupCompressionMethod":"lz4"}`
	if code, _, raw := s.do(t, "POST", "/v1/volumes", body); code != 200 {
		t.Fatalf("create as Longhorn's clients do: %d %s", code, raw)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"name":"v2","size":"1Gi","dataEngine":"v2"}`, "dataEngine: only v1"},
		{`{"name":"rwx","size":"1Gi","accessMode":"rwx"}`, "accessMode: only rwo"},
		{`{"name":"bad","size":"1Gi","numberOfReplicas":"3"}`, "numberOfReplicas: must be a whole number"},
		{`{"name":"bad","size":"1Gi",`, "malformed JSON"},
	} {
		if code, _, raw := s.do(t, "POST", "/v1/volumes", tc.body); code != 400 || !strings.Contains(raw, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.body, code, raw, tc.want)
		}
	}
}
