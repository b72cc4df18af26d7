package volumeengine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// restorable refuses a restore into a volume that is not being restored:
// a restore writes the backup's blocks over the volume, so a volume served
// by a frontend (attached, in use) or one with snapshots (it has a
// history, hence data) would lose what it holds. A volume being restored
// is new: its engine runs without a frontend and it has no snapshot yet
// (a retried restore of it still has none).
func (e *Engine) restorable() error {
	return e.holdsNothing("a restore", "restore only into a new volume created from the backup")
}

// holdsNothing refuses op (a restore, a clone) into a volume that may hold
// data: one served by a frontend, or one with snapshots. hint says what
// to do instead.
func (e *Engine) holdsNothing(op, hint string) error {
	e.mu.RLock()
	frontend := e.frontend
	members := e.healthy()
	e.mu.RUnlock()
	if frontend {
		return fmt.Errorf("%w: volume %s is attached with a frontend: %s would overwrite the data in use; %s", ErrPrecondition, e.name, op, hint)
	}
	if len(members) == 0 {
		return ErrNoHealthyReplica
	}
	list, err := members[0].r.Snapshots()
	if err != nil {
		return err
	}
	var names []string
	for _, s := range list {
		if s.Name != replica.HeadName {
			names = append(names, s.Name)
		}
	}
	if len(names) > 0 {
		sort.Strings(names)
		if len(names) > 3 {
			names = append(names[:3], "...")
		}
		return fmt.Errorf("%w: volume %s has snapshots (%s): it holds data %s would overwrite; %s", ErrPrecondition, e.name, strings.Join(names, ", "), op, hint)
	}
	return nil
}

// startRestore marks a restore of url in progress, unless one is already.
func (e *Engine) startRestore(url string) error {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	if e.restore.IsRestoring {
		return fmt.Errorf("%w: volume %s is being restored already, from %s", ErrPrecondition, e.name, e.restore.BackupURL)
	}
	e.restore = RestoreStatus{IsRestoring: true, State: "in_progress", BackupURL: url, LastRestored: e.restore.LastRestored}
	e.generation.Add(1)
	return nil
}

// restoring is the backup URL of the restore in progress, or "".
func (e *Engine) restoring() string {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	if !e.restore.IsRestoring {
		return ""
	}
	return e.restore.BackupURL
}
