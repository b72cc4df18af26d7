package kit

import (
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
)

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

// TestOwnershipClaim: an object owned by another node, or by none, is
// written with this node as owner and the sync told to end; one this node
// owns is not written; a failed write is the sync's error.
func TestOwnershipClaim(t *testing.T) {
	o := Ownership{NodeID: "node-1", IsUp: func(string) bool { return true }}
	log := logrus.NewEntry(logrus.New())
	for _, tc := range []struct {
		owner    string
		writeErr error
		claimed  bool
		wrote    bool
	}{
		{owner: "", claimed: true, wrote: true},
		{owner: "node-2", claimed: true, wrote: true},
		{owner: "node-1"},
		{owner: "node-2", writeErr: errors.New("conflict"), wrote: true},
	} {
		var wrote string
		claimed, err := o.Claim(log, tc.owner, func(owner string) error { wrote = owner; return tc.writeErr })
		if claimed != tc.claimed || (wrote != "") != tc.wrote || (tc.wrote && wrote != "node-1") || (err != nil) != (tc.writeErr != nil) {
			t.Errorf("owner %q, write error %v: claimed %v, wrote %q, err %v", tc.owner, tc.writeErr, claimed, wrote, err)
		}
	}
}
