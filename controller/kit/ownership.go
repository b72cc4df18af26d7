package kit

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
