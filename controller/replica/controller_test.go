package replica

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A replica of this node is served while its volume's engine is to run
// on another node, and while one still runs elsewhere unless it is to run
// here; never when marked failed or being deleted.
func TestWhenAReplicaIsServed(t *testing.T) {
	c := &Controller{nodeID: "node-1"}
	engine := func(node string, desire longhorn.InstanceState, state longhorn.InstanceState, owner string) *longhorn.Engine {
		e := &longhorn.Engine{}
		e.Spec.NodeID, e.Spec.DesireState = node, desire
		e.Status.CurrentState, e.Status.OwnerID = state, owner
		return e
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name    string
		replica longhorn.Replica
		engine  *longhorn.Engine
		want    bool
	}{
		{"engine to run on node-2", longhorn.Replica{}, engine("node-2", longhorn.InstanceStateRunning, "", ""), true},
		{"engine to run here", longhorn.Replica{}, engine("node-1", longhorn.InstanceStateRunning, longhorn.InstanceStateRunning, "node-2"), false},
		{"engine detached, still running on node-2", longhorn.Replica{}, engine("", longhorn.InstanceStateStopped, longhorn.InstanceStateRunning, "node-2"), true},
		{"engine detached and stopped", longhorn.Replica{}, engine("", longhorn.InstanceStateStopped, longhorn.InstanceStateStopped, "node-2"), false},
		{"engine detached, ran here", longhorn.Replica{}, engine("", longhorn.InstanceStateStopped, longhorn.InstanceStateRunning, "node-1"), false},
		{"no engine", longhorn.Replica{}, nil, false},
		{"marked failed", longhorn.Replica{Spec: longhorn.ReplicaSpec{FailedAt: "2026-12-02T00:00:00Z"}}, engine("node-2", longhorn.InstanceStateRunning, "", ""), false},
		{"being deleted", longhorn.Replica{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}, engine("node-2", longhorn.InstanceStateRunning, "", ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := c.wanted(&tc.replica, tc.engine)
			if got != tc.want || (!got && why == "") {
				t.Errorf("wanted = %v (%q), want %v and a reason when not", got, why, tc.want)
			}
		})
	}
}

func TestServedAddress(t *testing.T) {
	r := &longhorn.Replica{}
	if a := ServedAddress(r); a != "" {
		t.Errorf("not served: %q", a)
	}
	r.Status.StorageIP, r.Status.Port = "10.0.0.2", 9503
	if a := ServedAddress(r); a != "10.0.0.2:9503" {
		t.Errorf("served at %q", a)
	}
	r.Status.StorageIP = "fd00::2"
	if a := ServedAddress(r); a != "[fd00::2]:9503" {
		t.Errorf("served at %q", a)
	}
}
