package volume

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The replicas of other nodes are reached where their Replica's status
// says they are served; a failed one is not opened; one not served yet
// is named, with its node, in the error the Attach condition carries.
func TestRemoteReplicasAreThoseServedElsewhere(t *testing.T) {
	down := map[string]bool{"node-5": true}
	c := &Controller{ownership: kit.Ownership{NodeID: "node-2", IsUp: func(n string) bool { return !down[n] }}}
	rep := func(name, node, ip string, port int, healthy, failed bool) *longhorn.Replica {
		r := &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}}
		r.Spec.NodeID = node
		if healthy {
			r.Spec.HealthyAt = "2026-12-01T00:00:00Z"
		}
		if failed {
			r.Spec.FailedAt = "2026-12-02T00:00:00Z"
		}
		r.Status.StorageIP, r.Status.Port = ip, port
		return r
	}
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}}
	replicas := []*longhorn.Replica{
		rep("vol-r-0", "node-2", "", 0, true, false),            // here: opened from the disk
		rep("vol-r-1", "node-1", "10.0.0.1", 4000, true, false), // served
		rep("vol-r-2", "node-1", "10.0.0.1", 4000, false, false),
		rep("vol-r-3", "node-3", "10.0.0.3", 4000, true, true), // failed: not opened
	}
	remotes, notServed := c.remoteReplicas(v, replicas)
	if notServed != nil {
		t.Fatal(notServed)
	}
	if len(remotes) != 2 || remotes[0].Name != "vol-r-1" || remotes[0].Address != "10.0.0.1:4000" || remotes[0].New || !remotes[1].New {
		t.Fatalf("remotes %+v: want vol-r-1 and vol-r-2 (new) at 10.0.0.1:4000", remotes)
	}
	replicas = append(replicas, rep("vol-r-4", "node-4", "", 0, true, false))
	_, notServed = c.remoteReplicas(v, replicas)
	var ns *notServedError
	if !errors.As(notServed, &ns) || !strings.Contains(ns.Error(), `vol-r-4 (node "node-4")`) {
		t.Fatalf("not served = %v; want vol-r-4 of node-4 named", notServed)
	}
	if p := decideAttach(attachView{volume: &longhorn.Volume{Spec: longhorn.VolumeSpec{NodeID: "node-2"}}, nodeID: "node-2", notLocal: notServed, replicas: 5}); p.run || p.reason != ReasonReplicasNotServed {
		t.Fatalf("plan %+v: want no start, reason %s", p, ReasonReplicasNotServed)
	}
	// A node that is down may have left its address in the status: its
	// replica is not served.
	replicas = append(replicas[:4], rep("vol-r-5", "node-5", "10.0.0.5", 4000, true, false))
	_, notServed = c.remoteReplicas(v, replicas)
	if !errors.As(notServed, &ns) || !strings.Contains(ns.Error(), `vol-r-5 (node "node-5")`) {
		t.Fatalf("not served = %v; want vol-r-5 of node-5, which is down, named", notServed)
	}
}

// A start over remote replicas that failed waits remoteStartPause before
// the next (each takes a term, a write); one that succeeded clears it.
func TestAFailedRemoteStartPacesTheNext(t *testing.T) {
	var r remoteStarts
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if w := r.wait("vol", now); w != 0 {
		t.Fatalf("before any start: wait %s", w)
	}
	r.done("vol", errors.New("unreachable"), now)
	if w := r.wait("vol", now.Add(500*time.Millisecond)); w != remoteStartPause-500*time.Millisecond {
		t.Fatalf("after a failed start: wait %s", w)
	}
	if w := r.wait("other", now); w != 0 {
		t.Fatalf("another volume waits %s", w)
	}
	if w := r.wait("vol", now.Add(remoteStartPause)); w != 0 {
		t.Fatalf("after the pause: wait %s", w)
	}
	r.done("vol", nil, now)
	if w := r.wait("vol", now); w != 0 {
		t.Fatalf("after a start that succeeded: wait %s", w)
	}
}
