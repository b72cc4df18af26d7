package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func volumeOn(node, by string, disableFrontend bool) *longhorn.Volume {
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}, Spec: longhorn.VolumeSpec{NodeID: node, DisableFrontend: disableFrontend}}
	if by != "" {
		v.Annotations = map[string]string{types.AnnotationAttachedBy: by}
	}
	return v
}

const job = "recurring-job/nightly/20261122T010000Z"

func TestApplyAttach(t *testing.T) {
	cases := []struct {
		name                 string
		vol                  *longhorn.Volume
		node, by             string
		disableFrontend      bool
		wantChanged          bool
		wantConflict         bool
		wantNode, wantBy     string
		wantFrontendDisabled bool
	}{
		{name: "a job attaches a detached volume", vol: volumeOn("", "", false), node: "n1", by: job, disableFrontend: true,
			wantChanged: true, wantNode: "n1", wantBy: job, wantFrontendDisabled: true},
		{name: "a job's repeated attach changes nothing", vol: volumeOn("n1", job, true), node: "n1", by: job, disableFrontend: true,
			wantNode: "n1", wantBy: job, wantFrontendDisabled: true},
		{name: "a job does not take a user's volume on the same node", vol: volumeOn("n1", "", false), node: "n1", by: job, disableFrontend: true,
			wantConflict: true, wantNode: "n1"},
		{name: "a job does not take another job's volume", vol: volumeOn("n1", "recurring-job/other/x", true), node: "n1", by: job, disableFrontend: true,
			wantConflict: true, wantNode: "n1", wantBy: "recurring-job/other/x", wantFrontendDisabled: true},
		{name: "a job does not take a volume on another node", vol: volumeOn("n2", "", false), node: "n1", by: job,
			wantConflict: true, wantNode: "n2"},
		{name: "a user takes over a job's volume and turns the frontend on", vol: volumeOn("n1", job, true), node: "n1",
			wantChanged: true, wantNode: "n1"},
		{name: "a user's attach to another node is refused", vol: volumeOn("n2", job, true), node: "n1",
			wantConflict: true, wantNode: "n2", wantBy: job, wantFrontendDisabled: true},
		{name: "a user's repeated attach changes nothing", vol: volumeOn("n1", "", false), node: "n1", wantNode: "n1"},
		{name: "a user attaches a detached volume", vol: volumeOn("", "", false), node: "n1", wantChanged: true, wantNode: "n1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changed, err := applyAttach(c.vol, c.node, c.by, c.disableFrontend)
			if c.wantConflict != (err != nil) {
				t.Fatalf("err %v, want conflict %v", err, c.wantConflict)
			}
			if he, ok := err.(*httpError); err != nil && (!ok || he.status != http.StatusConflict) {
				t.Fatalf("err %#v, want a 409", err)
			}
			if changed != c.wantChanged || c.vol.Spec.NodeID != c.wantNode || attachedBy(c.vol) != c.wantBy || c.vol.Spec.DisableFrontend != c.wantFrontendDisabled {
				t.Fatalf("changed %v, node %q, by %q, frontend disabled %v", changed, c.vol.Spec.NodeID, attachedBy(c.vol), c.vol.Spec.DisableFrontend)
			}
		})
	}
}

func TestApplyDetach(t *testing.T) {
	cases := []struct {
		name         string
		vol          *longhorn.Volume
		by           string
		wantChanged  bool
		wantConflict bool
		wantNode     string
	}{
		{name: "the job detaches its own attachment", vol: volumeOn("n1", job, true), by: job, wantChanged: true},
		{name: "the job leaves a volume a user took over", vol: volumeOn("n1", "", false), by: job, wantConflict: true, wantNode: "n1"},
		{name: "the job leaves another job's volume", vol: volumeOn("n1", "recurring-job/other/x", true), by: job, wantConflict: true, wantNode: "n1"},
		{name: "a detached volume needs nothing", vol: volumeOn("", "", false), by: job},
		{name: "a plain detach detaches a job's volume", vol: volumeOn("n1", job, true), wantChanged: true},
		{name: "a plain detach detaches a user's volume", vol: volumeOn("n1", "", false), wantChanged: true},
		{name: "a stale record on a detached volume is cleared", vol: volumeOn("", job, false), by: job, wantChanged: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changed, err := applyDetach(c.vol, c.by)
			if c.wantConflict != (err != nil) {
				t.Fatalf("err %v, want conflict %v", err, c.wantConflict)
			}
			if changed != c.wantChanged || c.vol.Spec.NodeID != c.wantNode {
				t.Fatalf("changed %v, node %q", changed, c.vol.Spec.NodeID)
			}
			if c.vol.Spec.NodeID == "" && (attachedBy(c.vol) != "" || c.vol.Spec.DisableFrontend) {
				t.Fatalf("a detached volume keeps by %q, frontend disabled %v", attachedBy(c.vol), c.vol.Spec.DisableFrontend)
			}
		})
	}
}

// TestAttachAndDetachActions drives the rule through the handlers: the
// record shows on the volume, a job's detach after a user's take-over is
// a 409 that leaves the volume attached, and bad identities name the field.
func TestAttachAndDetachActions(t *testing.T) {
	node := &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: testNamespace}}
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}}
	s := newTestServer(t, node, vol)
	call := func(action, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/v1/volumes/vol?action="+action, strings.NewReader(body))
		// Even without a body: the API refuses a POST of another type.
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		out := map[string]any{}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s: non-JSON answer %q", action, body, rec.Body.String())
		}
		return rec.Code, out
	}
	if code, out := call("attach", `{"hostId":"node-1","disableFrontend":true,"attachedBy":"`+job+`"}`); code != 200 || out["attachedBy"] != job || out["nodeID"] != "node-1" {
		t.Fatalf("job attach: %d %v", code, out)
	}
	if code, out := call("attach", `{"hostId":"node-1"}`); code != 200 || out["attachedBy"] != "" {
		t.Fatalf("user attach: %d %v", code, out)
	}
	if code, out := call("detach", `{"attachedBy":"`+job+`"}`); code != 409 || !strings.Contains(out["message"].(string), "left attached") {
		t.Fatalf("job detach after the take-over: %d %v", code, out)
	}
	v, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Get(context.Background(), "vol", metav1.GetOptions{})
	if err != nil || v.Spec.NodeID != "node-1" || v.Spec.DisableFrontend {
		t.Fatalf("after the refused detach: %+v, %v", v.Spec, err)
	}
	if code, out := call("attach", `{"hostId":"node-1","attachedBy":"`+job+`"}`); code != 409 || out["code"] != "Conflict" {
		t.Fatalf("job attach of a user's volume: %d %v", code, out)
	}
	// A plain detach, with no body as before, and a job's detach once detached.
	if code, out := call("detach", ""); code != 200 || out["nodeID"] != "" {
		t.Fatalf("plain detach: %d %v", code, out)
	}
	if code, _ := call("detach", `{"attachedBy":"`+job+`"}`); code != 200 {
		t.Fatalf("job detach of a detached volume: %d", code)
	}
	for _, bad := range []struct{ action, body, want string }{
		{"attach", `{"hostId":"node-1","attachedBy":"-x"}`, "attachedBy: "},
		{"attach", `{"hostId":"node-1","attachedBy":"a b"}`, "attachedBy: "},
		{"attach", `{"hostId":"node-1","attachedBy":"` + strings.Repeat("a", 254) + `"}`, "attachedBy: at most 253"},
		{"attach", `{"hostId":"node-1","attachedBy":7}`, "attachedBy: must be a string"},
		{"detach", `{"attachedBy":"é"}`, "attachedBy: "},
		{"detach", `{"attachedby":1}`, "attachedBy: must be a string"},
		{"detach", `{"attachedBy":["me"]}`, "attachedBy: must be a string"},
		{"detach", `[]`, "request body"},
	} {
		code, out := call(bad.action, bad.body)
		if code != 400 || !strings.Contains(out["message"].(string), bad.want) {
			t.Errorf("%s %s: %d %v, want 400 naming %q", bad.action, bad.body, code, out, bad.want)
		}
	}
}

func TestSchemaNamesTheAttacherOfAttachAndDetach(t *testing.T) {
	byID := map[string]Schema{}
	for _, sc := range schemas() {
		byID[sc.ID] = sc
	}
	vol := byID["volume"]
	for action, input := range map[string]string{"attach": "attachInput", "detach": "detachInput"} {
		if got := vol.ResourceActions[action].Input; got != input {
			t.Errorf("%s input %q, want %q", action, got, input)
		}
		if f, ok := byID[input].ResourceFields["attachedBy"]; !ok || f.Type != "string" || f.Required {
			t.Errorf("%s attachedBy field %+v", input, f)
		}
	}
	for _, field := range []string{"nodeID", "attachedBy"} {
		if _, ok := vol.ResourceFields[field]; !ok {
			t.Errorf("volume field %s missing", field)
		}
	}
}
