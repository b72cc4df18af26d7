package types

import "testing"

func TestReplicasNode(t *testing.T) {
	for _, tc := range []struct {
		nodes []string
		want  string
	}{
		{nil, ""},
		{[]string{"node-1"}, "node-1"},
		{[]string{"node-1", "node-1"}, "node-1"},
		{[]string{"node-2", "node-1"}, "node-2"},
		{[]string{"", "node-1"}, "node-1"},
		{[]string{"node-2", "node-1", "node-1"}, "node-1"},
		{[]string{"node-1", "node-1", "node-2"}, "node-1"},
		{[]string{"node-3", "node-1", "node-2"}, "node-3"},
	} {
		if got := ReplicasNode(tc.nodes); got != tc.want {
			t.Errorf("ReplicasNode(%v) = %q, want %q", tc.nodes, got, tc.want)
		}
	}
}
