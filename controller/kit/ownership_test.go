package kit

import "testing"

func TestOwnershipResponsible(t *testing.T) {
	up := map[string]bool{"node-1": true, "node-2": true, "node-3": false}
	o := Ownership{NodeID: "node-1", IsUp: func(n string) bool { return up[n] }}
	cases := []struct {
		name      string
		ownerID   string
		preferred string
		want      bool
	}{
		{"an object with no owner is taken", "", "", true},
		{"an object this node owns stays here", "node-1", "", true},
		{"an object owned by a running peer is left to it", "node-2", "", false},
		{"an object owned by a node that is down is taken over", "node-3", "", true},
		{"an unregistered owner counts as down", "node-9", "", true},
		{"the preferred node wins over the current owner", "node-2", "node-1", true},
		{"a running preferred peer wins over this owner", "node-1", "node-2", false},
		{"a preferred node that is down falls back to the owner", "node-1", "node-3", true},
		{"a preferred node that is down leaves a running peer owner", "node-2", "node-3", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := o.Responsible(c.ownerID, c.preferred); got != c.want {
				t.Fatalf("responsible(%q, %q) = %v, want %v", c.ownerID, c.preferred, got, c.want)
			}
		})
	}
}
