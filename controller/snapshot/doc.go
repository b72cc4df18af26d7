// Package snapshot holds the Snapshot controller: one Snapshot object for
// every engine snapshot, the engine snapshot of every object a user
// creates, and deletion through the engine's mark-removed and purge. It runs
// on the node that owns the snapshot's volume.
package snapshot
