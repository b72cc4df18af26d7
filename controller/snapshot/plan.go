package snapshot

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// What one sync does is decided by decide, a pure function of what the
// sync read (a view), before anything is written; sync applies it. The
// decision table is decide_test.go.

// view is what a sync knows of a Snapshot object whose volume this node
// owns: the object (its metadata given already), its volume, the
// snapshot's entry in the volume's engine (nil when the engine has none),
// whether that engine runs (here, or as its mirror says), whether it runs
// here (hasEngine: the engine calls are possible), whether the engine
// here listed its snapshots (listed: info is then the engine's own
// answer, not its Engine object's mirror), and whether the engine here
// purged a snapshot of the name.
//
// A mirror lags its engine (a round of status writes, statusPace): a
// snapshot taken a moment ago is in the engine and not yet in the
// mirror. So no entry in a mirror never proves that the engine has no
// such snapshot, and nothing is released or judged lost on it.
type view struct {
	snap      *longhorn.Snapshot
	volume    *longhorn.Volume
	info      *longhorn.SnapshotInfo
	running   bool
	hasEngine bool
	listed    bool
	purged    bool
}

// action is what a sync does.
type action int

const (
	// nothing: the engine has no entry and nothing is to be made of that
	// yet (the engine does not run).
	nothing action = iota
	// releaseFinalizer: a deleted object whose engine snapshot is gone.
	releaseFinalizer
	// deleteInEngine: a deleted object whose engine snapshot is not
	// marked removed yet: delete it in the engine, then as markRemoved.
	deleteInEngine
	// markRemoved: a deleted object whose engine snapshot is marked
	// removed: the status says so, and a purge frees the data.
	markRemoved
	// createInEngine: a new object asking for its engine snapshot.
	createInEngine
	// deleteObject: the engine snapshot was deleted and purged (by a
	// recurring job or the API): the object goes too.
	deleteObject
	// reportError: status.error says why (plan.message); nothing else is
	// done.
	reportError
	// writeStatus: the status from the engine's entry.
	writeStatus
)

func (a action) String() string {
	return [...]string{"nothing", "releaseFinalizer", "deleteInEngine", "markRemoved", "createInEngine", "deleteObject", "reportError", "writeStatus"}[a]
}

// plan is decide's answer.
type plan struct {
	action  action
	message string // for reportError
}

// decide is what a sync does with what it read.
func decide(v view) plan {
	snap := v.snap
	if snap.DeletionTimestamp != nil {
		switch {
		case !v.hasEngine:
			return plan{action: reportError, message: fmt.Sprintf("the deletion waits for volume %s to be attached: its engine deletes the snapshot's data", v.volume.Name)}
		case v.info == nil && v.listed:
			return plan{action: releaseFinalizer}
		case v.info == nil:
			return plan{action: reportError, message: fmt.Sprintf("the deletion waits: the engine of volume %s cannot list its snapshots (no healthy replica to read)", v.volume.Name)}
		case !v.info.Removed:
			return plan{action: deleteInEngine}
		}
		return plan{action: markRemoved}
	}
	if v.info == nil && snap.Spec.CreateSnapshot && snap.Status.CreationTime == "" && v.hasEngine {
		return plan{action: createInEngine}
	}
	if v.info == nil && v.running && (snap.Status.CreationTime != "" || !snap.Spec.CreateSnapshot) {
		// A delete and its purge may both land between two mirrors of
		// the engine, so the object may never have seen the snapshot
		// marked removed: the engine remembers what it purged. An object
		// adopted from the engine (createSnapshot false) may not even
		// have had its first status written.
		switch {
		case snap.Status.MarkRemoved || (v.hasEngine && v.purged):
			// Its deletion was asked for already: the object follows.
			return plan{action: deleteObject}
		case !v.listed:
			// Only a mirror says so, which may lag.
			return plan{action: nothing}
		case snap.Status.CreationTime == "":
			return plan{action: reportError, message: fmt.Sprintf("volume %s has no snapshot of this name, and createSnapshot is false", v.volume.Name)}
		}
		return plan{action: reportError, message: "the snapshot is gone from the engine"}
	}
	if v.info == nil {
		return plan{action: nothing}
	}
	return plan{action: writeStatus}
}

// removedStatus is the status of a deleted snapshot its engine has marked
// removed: not ready, and, while it has more than one child, why its
// data cannot be purged yet.
func removedStatus(info *longhorn.SnapshotInfo, v *longhorn.Volume, nodeID string) longhorn.SnapshotStatus {
	status := snapshotStatus(info, v, nodeID)
	status.MarkRemoved, status.ReadyToUse = true, false
	if len(info.Children) > 1 {
		status.Error = fmt.Sprintf("the deletion waits until only one of the snapshot's %d children (%s) is left: its data is then merged into that one",
			len(info.Children), strings.Join(slices.Sorted(maps.Keys(info.Children)), ", "))
	}
	return status
}
