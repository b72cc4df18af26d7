package backup

import (
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
)

// What an event asks of the controller. Only a backup that finished, one
// that an engine stopped reporting, and a deletion read the target, and
// then only the volume concerned: a snapshot, an attach or a backup's
// progress reads nothing from it.
type work int

const (
	// workNone: nothing to do.
	workNone work = iota
	// workMirror: copy what engines report of their running backups
	// into Backup objects; the target is not read.
	workMirror
	// workRefresh: read the volume from the target (and run the
	// deletions asked of it).
	workRefresh
)

// engineWork is what an engine's change asks: old is nil for an engine
// just seen, cur nil for one deleted.
//
// An engine just seen with a backup that finished asks nothing: the poll
// at start reads the target, and engines are all "just seen" then.
func engineWork(old, cur *longhorn.Engine) work {
	var before, after map[string]*longhorn.EngineBackupStatus
	if old != nil {
		before = old.Status.BackupStatus
	}
	if cur != nil {
		after = cur.Status.BackupStatus
	}
	w := workNone
	for name, st := range after {
		prev := before[name]
		switch {
		case st == nil:
		case !running(st.State):
			if old != nil && (prev == nil || prev.State != st.State) {
				// Finished: the target now lists it, or it failed, maybe
				// because the target cannot be read, which a read of
				// its volume says.
				return workRefresh
			}
		case prev == nil || *prev != *st:
			w = workMirror
		}
	}
	for name, prev := range before {
		if _, ok := after[name]; !ok && prev != nil && running(prev.State) {
			// No engine reports it any more (the engine restarted or
			// went away): the target says whether it completed, or it
			// was interrupted.
			return workRefresh
		}
	}
	return w
}

// refreshed are the backups of an engine's change that ask its volume
// read from their target: those that finished, and those running that no
// engine reports any more (as engineWork finds them), with their status.
func refreshed(old, cur *longhorn.Engine) map[string]*longhorn.EngineBackupStatus {
	if old == nil {
		return nil
	}
	out := map[string]*longhorn.EngineBackupStatus{}
	var after map[string]*longhorn.EngineBackupStatus
	if cur != nil {
		after = cur.Status.BackupStatus
	}
	for name, st := range after {
		if prev := old.Status.BackupStatus[name]; st != nil && !running(st.State) && (prev == nil || prev.State != st.State) {
			out[name] = st
		}
	}
	for name, prev := range old.Status.BackupStatus {
		if _, ok := after[name]; !ok && prev != nil && running(prev.State) {
			out[name] = prev
		}
	}
	return out
}

// running reports whether an engine's backup state is neither final
// state.
func running(state string) bool {
	return state != backupStateCompleted && state != string(longhorn.BackupStateError)
}

// backupWork is what a Backup object's change asks: a user's deletion
// deletes from the target and refreshes the volume. The controller's own
// writes ask nothing.
func backupWork(b *longhorn.Backup) work {
	if b.DeletionTimestamp != nil && kit.HasFinalizer(b) {
		return workRefresh
	}
	return workNone
}

// backupVolumeWork is what a BackupVolume's change asks: a deletion of
// the whole volume, or a refresh asked for (spec.syncRequestedAt, the
// API's backupVolumeSync), reads the volume from the target.
func backupVolumeWork(bv *longhorn.BackupVolume) work {
	switch {
	case bv.DeletionTimestamp != nil && kit.HasFinalizer(bv):
		return workRefresh
	case syncRequested(bv):
		return workRefresh
	}
	return workNone
}

// syncRequested reports whether a refresh of the BackupVolume was asked
// for since its last sync.
func syncRequested(bv *longhorn.BackupVolume) bool {
	return !bv.Spec.SyncRequestedAt.IsZero() && bv.Spec.SyncRequestedAt.After(bv.Status.LastSyncedAt.Time)
}

// backupVolumeOf is the volume whose refresh a Backup's deletion asks.
func backupVolumeOf(b *longhorn.Backup) string { return datastore.BackupVolumeName(b) }
