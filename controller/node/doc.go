// Package node holds the node controller: this manager's heartbeat Lease,
// each node's Ready condition from its heartbeat, and this node's disks
// (registration, free space, readiness). Every node reconciles only its own
// disks; any node may mark a peer not ready once its heartbeat is stale.
package node
