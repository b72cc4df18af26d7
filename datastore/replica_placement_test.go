package datastore

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func replicaOn(name, node string) *longhorn.Replica {
	return &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{NodeID: node}}}
}

func TestAttachRefusalNamesTheNodesThatHoldTheReplicas(t *testing.T) {
	for _, tc := range []struct {
		name     string
		node     string
		replicas []*longhorn.Replica
		want     []string
	}{
		{"no replicas yet", "node-2", nil, nil},
		{"all here", "node-1", []*longhorn.Replica{replicaOn("v-r-0", "node-1"), replicaOn("v-r-1", "node-1")}, nil},
		{"all on another node", "node-2", []*longhorn.Replica{replicaOn("v-r-1", "node-1"), replicaOn("v-r-0", "node-1")},
			[]string{`volume v cannot be attached to node "node-2"`, `node "node-1" (v-r-0, v-r-1)`, `attach it to "node-1"`}},
		{"split", "node-1", []*longhorn.Replica{replicaOn("v-r-0", "node-1"), replicaOn("v-r-1", "node-3")},
			[]string{`node "node-3" (v-r-1)`, "no single node holds them all"}},
		{"split elsewhere", "node-2", []*longhorn.Replica{replicaOn("v-r-0", "node-1"), replicaOn("v-r-1", "node-3")},
			[]string{`node "node-1" (v-r-0) and node "node-3" (v-r-1)`, "no single node holds them all"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := AttachRefusal("v", tc.node, tc.replicas)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("not refused")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
	if n := ReplicasNode([]*longhorn.Replica{replicaOn("a", "node-1"), replicaOn("b", "node-1")}); n != "node-1" {
		t.Errorf("ReplicasNode %q", n)
	}
	if n := ReplicasNode([]*longhorn.Replica{replicaOn("b", "node-1"), replicaOn("a", "node-2")}); n != "node-2" {
		t.Errorf("ReplicasNode of split replicas %q, want the first replica's node", n)
	}
	failed := replicaOn("a", "node-2")
	failed.Spec.FailedAt = "2026-12-02T00:00:00Z"
	if n := ReplicasNode([]*longhorn.Replica{failed, replicaOn("b", "node-1")}); n != "node-1" {
		t.Errorf("ReplicasNode with a failed replica first %q, want the healthy one's node", n)
	}
}
