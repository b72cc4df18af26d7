package controller

// ownership decides which node's manager reconciles an object, recorded in
// the object's status.ownerID. The rule works for one node and for many:
//
//  1. If the object names a preferred node (for a volume, the node it is
//     attached to) and that node's manager is up, that node owns it.
//  2. Otherwise the current owner keeps it while its manager is up.
//  3. Otherwise (no owner, or the owner is down) any manager may take it.
//     Several may try at once; the status write carries the resource
//     version, so only one succeeds and the others see the new owner on
//     their next sync.
type ownership struct {
	nodeID string
	isUp   func(node string) bool
}

// responsible reports whether this node should reconcile an object owned
// by ownerID that prefers the node preferred ("" for none).
func (o ownership) responsible(ownerID, preferred string) bool {
	if preferred != "" && o.isUp(preferred) {
		return preferred == o.nodeID
	}
	if ownerID != "" && ownerID != o.nodeID && o.isUp(ownerID) {
		return false
	}
	return true
}
