package jobrun

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestDecideAttachment(t *testing.T) {
	const me = "recurring-job/snap/20261122T010000Z"
	cases := []struct {
		name    string
		vol     client.Volume
		allowed bool
		want    attachment
	}{
		{"attached by a user: used, left attached", client.Volume{State: "attached", NodeID: "n1"}, false, useAttached},
		{"attached by another job: used, left attached", client.Volume{State: "attached", NodeID: "n1", AttachedBy: "recurring-job/x/1"}, true, useAttached},
		{"attached by this run (resumed): detached after", client.Volume{State: "attached", NodeID: "n1", AttachedBy: me}, true, waitOwn},
		{"detached, not allowed", client.Volume{State: "detached"}, false, skip},
		{"detached with no node: attached by the run", client.Volume{State: "detached"}, true, attachOwn},
		{"attaching for a workload: waited for, left attached", client.Volume{State: "attaching", NodeID: "n1"}, true, waitOther},
		{"detached with a node set (attach pending): waited for", client.Volume{State: "detached", NodeID: "n1"}, true, waitOther},
		{"being attached by this run: waited for, detached after", client.Volume{State: "detached", NodeID: "n1", AttachedBy: me}, true, waitOwn},
		{"attaching, not allowed", client.Volume{State: "attaching", NodeID: "n1"}, false, skip},
		{"attached with no node (being detached)", client.Volume{State: "attached"}, true, waitDetached},
		{"detaching", client.Volume{State: "detaching"}, true, waitDetached},
		{"deleting", client.Volume{State: "deleting", NodeID: "n1"}, true, skip},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := decideAttachment(&c.vol, me, c.allowed)
			if got != c.want || why == "" {
				t.Fatalf("got %d (%q), want %d", got, why, c.want)
			}
		})
	}
}

// attachFake keeps one volume's attachment by the API's rule and answers
// the rest from a fakeManager. attachAfter GETs of a volume with a node
// set, it is attached.
type attachFake struct {
	*fakeManager
	mu          sync.Mutex
	vol         client.Volume
	gets        int
	attachAfter int
	calls       []string
	// onAttach, when set, runs before the attach rule (to lose a race).
	onAttach func(f *attachFake)
}

func (f *attachFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	conflict := func(msg string) {
		reply(409, map[string]any{"status": 409, "code": "Conflict", "message": msg})
	}
	path := strings.TrimPrefix(r.URL.Path, "/v1/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case path == "settings/allow-recurring-job-while-volume-detached":
		reply(200, map[string]string{"value": "true"})
	case path == "nodes":
		reply(200, map[string]any{"data": []any{map[string]any{"name": "node-1", "conditions": map[string]any{"Ready": map[string]string{"type": "Ready", "status": "True"}}}}})
	case path == "volumes/"+f.vol.Name && r.Method == http.MethodGet:
		if f.vol.NodeID != "" && f.vol.State != "attached" {
			if f.gets++; f.gets >= f.attachAfter {
				f.vol.State = "attached"
			}
		}
		reply(200, f.vol)
	case path == "volumes/"+f.vol.Name && (r.URL.Query().Get("action") == "attach" || r.URL.Query().Get("action") == "detach"):
		var in struct{ HostID, AttachedBy string }
		json.NewDecoder(r.Body).Decode(&in)
		action := r.URL.Query().Get("action")
		f.calls = append(f.calls, action+" "+in.AttachedBy)
		if action == "attach" {
			if f.onAttach != nil {
				f.onAttach(f)
			}
			if f.vol.NodeID != "" && f.vol.AttachedBy != in.AttachedBy {
				conflict("attached by someone else")
				return
			}
			f.vol.NodeID, f.vol.AttachedBy = in.HostID, in.AttachedBy
		} else {
			if f.vol.NodeID != "" && in.AttachedBy != "" && f.vol.AttachedBy != in.AttachedBy {
				conflict("attached by someone else; left attached")
				return
			}
			f.vol.NodeID, f.vol.AttachedBy, f.vol.State = "", "", "detached"
		}
		reply(200, f.vol)
	default:
		f.mu.Unlock()
		defer f.mu.Lock()
		f.fakeManager.ServeHTTP(w, r)
	}
}

// userAttach is a workload's plain attach, as the API applies it.
func (f *attachFake) userAttach() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vol.NodeID, f.vol.AttachedBy = "node-1", ""
}

func runAttachFake(t *testing.T, f *attachFake, afterAttach func()) Result {
	t.Helper()
	r := newTaskExecutor(t, 1, longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 1, Concurrency: 1}, f)
	if afterAttach != nil {
		r.AfterAttach = func(context.Context, string, string) { afterAttach() }
	}
	res, err := r.Run(context.Background(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func newAttachFake(vol client.Volume) *attachFake {
	return &attachFake{fakeManager: &fakeManager{snapshots: map[string][]client.Snapshot{}}, vol: vol, attachAfter: 2}
}

const runID = "recurring-job/snap/20261122T010000Z"

func TestARunAttachesADetachedVolumeInItsNameAndDetachesIt(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached"})
	if res := runAttachFake(t, f, nil); res.Succeeded != 1 {
		t.Fatalf("%+v", res)
	}
	if got := strings.Join(f.calls, ","); got != "attach "+runID+",detach "+runID {
		t.Fatalf("calls %s", got)
	}
	if f.vol.NodeID != "" || len(f.snapshots["vol-0000"]) != 1 {
		t.Fatalf("volume %+v, snapshots %v", f.vol, f.snapshots)
	}
}

func TestAVolumeTakenOverDuringTheRunStaysAttached(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached"})
	if res := runAttachFake(t, f, f.userAttach); res.Succeeded != 1 {
		t.Fatalf("%+v", res)
	}
	if got := strings.Join(f.calls, ","); got != "attach "+runID+",detach "+runID {
		t.Fatalf("calls %s", got)
	}
	if f.vol.NodeID != "node-1" || f.vol.AttachedBy != "" {
		t.Fatalf("the workload lost its volume: %+v", f.vol)
	}
}

func TestAVolumeAttachingForAWorkloadIsWaitedForAndLeftAttached(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached", NodeID: "node-1"})
	f.attachAfter = 5
	if res := runAttachFake(t, f, nil); res.Succeeded != 1 {
		t.Fatalf("%+v", res)
	}
	if len(f.calls) != 0 || f.vol.NodeID != "node-1" || len(f.snapshots["vol-0000"]) != 1 {
		t.Fatalf("calls %v, volume %+v, snapshots %v", f.calls, f.vol, f.snapshots)
	}
}

func TestAnAttachLostToAWorkloadUsesTheVolumeAndLeavesIt(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached"})
	f.onAttach = func(f *attachFake) { f.vol.NodeID = "node-1" } // the workload was faster
	if res := runAttachFake(t, f, nil); res.Succeeded != 1 {
		t.Fatalf("%+v", res)
	}
	if got := strings.Join(f.calls, ","); got != "attach "+runID {
		t.Fatalf("calls %s: want the refused attach only", got)
	}
	if f.vol.NodeID != "node-1" || f.vol.State != "attached" {
		t.Fatalf("volume %+v", f.vol)
	}
}

func TestAVolumeDetachedWhileTheRunWaitsFailsAndIsLeftAlone(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached", NodeID: "node-1"})
	f.attachAfter = 1 << 30
	go func() {
		time.Sleep(300 * time.Millisecond)
		f.mu.Lock()
		f.vol.NodeID = ""
		f.mu.Unlock()
	}()
	if res := runAttachFake(t, f, nil); res.Failed != 1 {
		t.Fatalf("%+v", res)
	}
	if len(f.calls) != 0 {
		t.Fatalf("calls %v", f.calls)
	}
}

// A run attaches a detached volume on the node that holds its replicas
// (the manager refuses any other), not on the first Ready node.
func TestARunAttachesAVolumeWhereItsReplicasAre(t *testing.T) {
	f := newAttachFake(client.Volume{Name: "vol-0000", State: "detached", Replicas: []client.VolumeReplica{{Name: "vol-0000-r-0", HostID: "node-2"}}})
	var node string
	if res := runAttachFake(t, f, func() { node = f.vol.NodeID }); res.Succeeded != 1 {
		t.Fatalf("%+v", res)
	}
	if node != "node-2" {
		t.Fatalf("attached on %q, want node-2 where the replica is", node)
	}
}
