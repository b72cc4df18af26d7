package volumeengine

import (
	"context"
	"fmt"
	"sort"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// Backup states, as Longhorn's Backup objects have them.
const (
	BackupStateInProgress = "InProgress"
	BackupStateCompleted  = "Completed"
	BackupStateError      = "Error"
)

// BackupStatus is the progress of one backup this engine runs or ran.
type BackupStatus struct {
	Snapshot string
	Progress int
	State    string
	URL      string
	Error    string

	// finished orders the finished backups, for pruning: 0 while running.
	finished uint64
}

// maxFinishedBackups is how many finished backups an engine keeps a
// record of; older ones go as new ones finish. The manager mirrors the
// records into the Engine object, which must stay far below etcd's size
// limit; a finished backup's outcome is in its Backup object by then
// (the backup controller reads the records every poll, and a volume runs
// one backup at a time).
const maxFinishedBackups = 8

// BackupOption changes how StartBackup backs up.
type BackupOption func(*backupOptions)

type backupOptions struct{ full bool }

// FullBackup makes the backup full: every block of the snapshot stored,
// uploaded again where the target has it, nothing taken from the
// volume's last backup.
func FullBackup() BackupOption { return func(o *backupOptions) { o.full = true } }

// StartBackup backs snapshot up to the store under name, in the
// background; BackupStatus follows it. Only the blocks changed since the
// snapshot of the volume's last backup are read when the replica still
// has that snapshot.
//
// The backup holds its snapshot as an export does, until it ends: a
// delete meanwhile is refused with a HeldError naming the backup, so no
// purge merges the snapshot away and no trim punches it while the backup
// reads it in place. A snapshot already deleted (marked removed) is not
// backed up: ErrPrecondition.
func (e *Engine) StartBackup(name, snapshot string, store *backupstore.Store, labels map[string]string, opts ...BackupOption) error {
	var o backupOptions
	for _, opt := range opts {
		opt(&o)
	}
	e.called("StartBackup")
	view, r, release, err := e.openSnapshot(snapshot, 0, -1, 0, name)
	if err != nil {
		return err
	}
	e.backupMu.Lock()
	if st, ok := e.backups[name]; ok && st.State == BackupStateInProgress {
		e.backupMu.Unlock()
		release()
		return nil
	}
	// The URL from the start: it says which target the backup goes to
	// (the manager mirrors each target apart) while it runs.
	e.backups[name] = &BackupStatus{Snapshot: snapshot, State: BackupStateInProgress, URL: store.URL(e.name, name)}
	e.backupMu.Unlock()
	e.generation.Add(1)

	go func() {
		done, stats, err := e.runBackup(name, snapshot, store, labels, r, view, o)
		// The hold ends before the status says the backup ended: a
		// delete that waits for it finds the snapshot free once it sees
		// the backup done.
		release()
		e.setBackup(name, func(st *BackupStatus) {
			if err != nil {
				st.State, st.Error = BackupStateError, err.Error()
				return
			}
			st.State, st.Progress, st.URL = BackupStateCompleted, 100, store.URL(e.name, done.Name)
		})
		e.finishBackup(name)
		log := e.log.WithFields(logrus.Fields{"backup": name, "snapshot": snapshot, "full": o.full, "read": stats.BytesRead, "uploaded": stats.BytesUploaded, "reUploaded": stats.BytesReUploaded})
		if err != nil {
			log.WithError(err).Error("Backup failed")
		} else {
			log.Info("Backup completed")
		}
		e.generation.Add(1)
		e.changed()
	}()
	return nil
}

// runBackup backs the snapshot view up; a panic in it (the target's
// content is not trusted) is the backup's error, not the process's end.
func (e *Engine) runBackup(name, snapshot string, store *backupstore.Store, labels map[string]string, r LayerReader, view *replica.SnapshotView,
	o backupOptions) (done *backupstore.BackupInfo, stats backupstore.Stats, err error) {
	defer panics.Recover(e.log.WithFields(logrus.Fields{"backup": name, "snapshot": snapshot}), &err)
	req := backupstore.BackupRequest{
		Name: name, Full: o.full, Volume: e.name, Snapshot: snapshot, SnapshotID: view.ID(), SnapshotCreatedAt: view.Created(), Labels: labels, Source: view,
		Progress: func(p int) { e.setBackup(name, func(st *BackupStatus) { st.Progress = p }) },
	}
	if b := r.Backing(); b != nil {
		// From the view itself: the snapshot's name may have been
		// purged and taken by another since the view was opened.
		req.Allocated, req.BackingImageName, req.BackingImageChecksum = view.Allocated(), b.Name, b.Checksum
	}
	// The base is the very snapshot the last backup was taken from,
	// found by its ID: a snapshot that took its name after a purge
	// is another one, and the backup is then full. The store reads the
	// last backup (once, under the volume's lock) and asks for the
	// blocks changed since.
	req.ChangedSinceLast = func(last *backupstore.BackupInfo) []bool {
		changed, full, err := r.ChangedBlocksByID(last.SnapshotID, view.ID())
		if err != nil || full {
			return nil
		}
		return changed
	}
	return store.Backup(req)
}

func (e *Engine) setBackup(name string, f func(*BackupStatus)) {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	if st, ok := e.backups[name]; ok {
		f(st)
	}
	e.generation.Add(1)
}

// finishBackup marks the backup finished and forgets the oldest finished
// ones beyond maxFinishedBackups.
func (e *Engine) finishBackup(name string) {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	e.finishedBackups++
	if st, ok := e.backups[name]; ok {
		st.finished = e.finishedBackups
	}
	var finished []string
	for n, st := range e.backups {
		if st.finished > 0 {
			finished = append(finished, n)
		}
	}
	if len(finished) <= maxFinishedBackups {
		return
	}
	sort.Slice(finished, func(i, j int) bool { return e.backups[finished[i]].finished < e.backups[finished[j]].finished })
	for _, n := range finished[:len(finished)-maxFinishedBackups] {
		delete(e.backups, n)
	}
}

// BackupsFinished counts the backups this engine has ended, completed or
// failed. It moves before the change that reports the end (OnChange), so
// a reader told of a change can tell a backup's end from other changes
// without reading the status. Not a call of the control API.
func (e *Engine) BackupsFinished() uint64 {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	return e.finishedBackups
}

// BackupStatuses reports the backups running and the newest finished
// ones (maxFinishedBackups).
func (e *Engine) BackupStatuses() map[string]BackupStatus {
	e.called("BackupStatuses")
	return e.backupStatuses()
}

func (e *Engine) backupStatuses() map[string]BackupStatus {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	out := make(map[string]BackupStatus, len(e.backups))
	for name, st := range e.backups {
		out[name] = *st
	}
	return out
}

// RestoreStatus is the progress of the engine's last restore.
type RestoreStatus struct {
	IsRestoring  bool
	Progress     int
	State        string
	Error        string
	LastRestored string
	BackupURL    string
}

// Restore writes a backup into the volume through every healthy replica;
// RestoreStatus follows it. The volume must be new: blocks the backup
// lacks are left as they are, so a restore into a volume with a frontend
// or snapshots is refused (restore_guard.go), as is a second one at once.
// Cancelling ctx stops it before its next block, as an error.
func (e *Engine) Restore(ctx context.Context, store *backupstore.Store, volume, backup string) error {
	e.called("Restore")
	if err := e.restorable(); err != nil {
		return err
	}
	if err := e.startRestore(store.URL(volume, backup)); err != nil {
		return err
	}
	err := e.runRestore(ctx, store, volume, backup)
	e.setRestore(func(st *RestoreStatus) {
		st.IsRestoring = false
		if err != nil {
			st.State, st.Error = "error", err.Error()
			return
		}
		st.State, st.Progress, st.LastRestored = "complete", 100, backup
	})
	return err
}

// runRestore writes the backup into the volume; a panic in it is the
// restore's error, so the restore status never stays in progress.
func (e *Engine) runRestore(ctx context.Context, store *backupstore.Store, volume, backup string) (err error) {
	defer panics.Recover(e.log.WithFields(logrus.Fields{"restore": backup, "from": volume}), &err)
	dst := cancellableWriter{ctx: ctx, e: e}
	if _, err := store.Restore(volume, backup, dst, func(p int) { e.setRestore(func(st *RestoreStatus) { st.Progress = p }) }); err != nil {
		return err
	}
	return e.Sync()
}

func (e *Engine) setRestore(f func(*RestoreStatus)) {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	f(&e.restore)
	e.generation.Add(1)
}

// RestoreStatus reports the last restore.
func (e *Engine) RestoreStatus() RestoreStatus {
	e.called("RestoreStatus")
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	return e.restore
}

// cancellableWriter writes into the engine until its context ends.
type cancellableWriter struct {
	ctx context.Context
	e   *Engine
}

func (w cancellableWriter) WriteAt(p []byte, off int64) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, fmt.Errorf("restore stopped: %w", err)
	}
	return w.e.WriteAt(p, off)
}

// Size lets the store check the backup fits the volume.
func (w cancellableWriter) Size() int64 { return w.e.Size() }
