package kit

import (
	"fmt"

	"github.com/sirupsen/logrus"
)

// Ownership decides which node's manager reconciles an object, recorded in
// the object's status.ownerID. The rule works for one node and for many:
//
//  1. If the object names a preferred node (for a volume, the node it is
//     attached to) and that node's manager is up, that node owns it.
//  2. Otherwise the current owner keeps it while its manager is up.
//  3. Otherwise (no owner, or the owner is down) any manager may take it.
//     Several may try at once; the status write carries the resource
//     version, so only one succeeds and the others see the new owner on
//     their next sync.
type Ownership struct {
	// NodeID is this manager's node.
	NodeID string
	// IsUp tells whether a node's manager is up (its heartbeat is fresh).
	IsUp func(node string) bool
}

// Responsible reports whether this node should reconcile an object owned
// by ownerID that prefers the node preferred ("" for none).
func (o Ownership) Responsible(ownerID, preferred string) bool {
	if preferred != "" && o.IsUp(preferred) {
		return preferred == o.NodeID
	}
	if ownerID != "" && ownerID != o.NodeID && o.IsUp(ownerID) {
		return false
	}
	return true
}

// Claim makes this node the owner of an object whose status names
// ownerID, when that is another node or none: write stores the object
// with owner as its status.ownerID (a status update, whose resource
// version lets one of several claimants win). It reports whether it
// wrote; the sync then ends, since the write brings the object back with
// its new owner. Call it once Responsible has said this node should
// reconcile the object.
func (o Ownership) Claim(log *logrus.Entry, ownerID string, write func(owner string) error) (bool, error) {
	if ownerID == o.NodeID {
		return false, nil
	}
	if err := write(o.NodeID); err != nil {
		return false, fmt.Errorf("claim ownership: %w", err)
	}
	log.WithField("previousOwner", ownerID).Info("Took ownership")
	return true, nil
}
