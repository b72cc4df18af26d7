package volumeengine

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// SnapshotHoldLease is how long a snapshot stays held after a read of it
// ends. An export reads a snapshot range after range, one call each; the
// lease keeps the snapshot from being deleted between two calls.
const SnapshotHoldLease = time.Minute

// snapshotHold counts the open reads of a snapshot and when its lease ends.
type snapshotHold struct {
	// readers counts the exports and clones reading the snapshot.
	readers int
	// backups counts the reads of the backups reading it, by backup name.
	backups map[string]int
	until   time.Time
}

// reading tells whether a read of the snapshot is open.
func (h *snapshotHold) reading() bool { return h.readers > 0 || len(h.backups) > 0 }

// backupNames names the backups reading the snapshot, sorted; nil for
// none.
func (h *snapshotHold) backupNames() []string {
	if len(h.backups) == 0 {
		return nil
	}
	names := make([]string, 0, len(h.backups))
	for n := range h.backups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// who names the open reads, for a refused delete.
func (h *snapshotHold) who() string {
	var parts []string
	if names := h.backupNames(); len(names) > 0 {
		parts = append(parts, "backup "+strings.Join(names, ", backup "))
	}
	if h.readers > 0 {
		parts = append(parts, fmt.Sprintf("%d export(s) (a backing image made from the volume, or a clone of it)", h.readers))
	}
	return strings.Join(parts, " and by ")
}

// OpenSnapshotForRead opens a read-only view of [off, end) of snapshot
// name (end < 0: to the volume's end) on the first healthy replica of
// this process and
// holds the snapshot: deleting it is refused
// while the view is open and for SnapshotHoldLease after release, which
// closes the view. A snapshot marked removed cannot be opened: a purge
// may be about to merge it away.
func (e *Engine) OpenSnapshotForRead(name string, off, end int64) (*replica.SnapshotView, func(), error) {
	e.called("OpenSnapshotForRead")
	view, _, release, err := e.openSnapshot(name, off, end, SnapshotHoldLease, "")
	return view, release, err
}

// OpenSnapshotForClone opens a read-only view of the whole of snapshot
// name, held while the view is open and not after: a clone reads it in
// one go, so its snapshot may be deleted as soon as the clone is done.
func (e *Engine) OpenSnapshotForClone(name string) (*replica.SnapshotView, func(), error) {
	e.called("OpenSnapshotForClone")
	view, _, release, err := e.openSnapshot(name, 0, -1, 0, "")
	return view, release, err
}

// openSnapshot opens the view on the first healthy replica whose layers
// it can read (LayerReader), which it returns too, and holds the snapshot while the view is open and for
// lease after; backup names the backup that reads it, "" for an export
// or a clone. The hold is taken under the engine's lock, which a delete
// takes exclusively: a delete either marked the snapshot removed before
// (the open is refused) or finds the hold.
func (e *Engine) openSnapshot(name string, off, end int64, lease time.Duration, backup string) (*replica.SnapshotView, LayerReader, func(), error) {
	if name == replica.HeadName {
		return nil, nil, nil, fmt.Errorf("%w: %s is not a snapshot: take one and read that", ErrInvalid, replica.HeadName)
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	members := e.healthy()
	if len(members) == 0 {
		return nil, nil, nil, ErrNoHealthyReplica
	}
	what := "reading snapshot " + name
	if backup != "" {
		what = "backup " + backup + " of snapshot " + name
	}
	r, m, err := e.layersOf(what, members)
	if err != nil {
		return nil, nil, nil, err
	}
	exists, removed := r.SnapshotRemoved(name)
	switch {
	case !exists:
		return nil, nil, nil, fmt.Errorf("%w: snapshot %s", ErrNotFound, name)
	case removed:
		return nil, nil, nil, fmt.Errorf("%w: snapshot %s is deleted (marked removed), it cannot be read", ErrPrecondition, name)
	}
	// A snapshot taken before the volume grew has the size it had then.
	if size, _ := r.SnapshotVolumeSize(name); off < 0 || off > size || end > size || (end >= 0 && end < off) {
		return nil, nil, nil, fmt.Errorf("%w: range offset %d to %d: must lie within the snapshot's %d bytes", ErrInvalid, off, end, size)
	}
	view, err := r.OpenSnapshotRange(name, off, end)
	if err != nil {
		e.fail(m, err)
		return nil, nil, nil, fmt.Errorf("snapshot %s on replica %s: %w", name, m.name, err)
	}
	e.holdMu.Lock()
	if e.holds == nil {
		e.holds = map[string]*snapshotHold{}
	}
	h := e.holds[name]
	if h == nil {
		h = &snapshotHold{backups: map[string]int{}}
		e.holds[name] = h
	}
	if backup != "" {
		h.backups[backup]++
	} else {
		h.readers++
	}
	e.holdMu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			view.Close()
			e.holdMu.Lock()
			if backup != "" {
				if h.backups[backup]--; h.backups[backup] <= 0 {
					delete(h.backups, backup)
				}
			} else {
				h.readers--
			}
			// A shorter lease never cuts another reader's.
			if until := e.clock.Now().Add(lease); until.After(h.until) {
				h.until = until
			}
			e.holdMu.Unlock()
		})
	}
	return view, r, release, nil
}

// HeldError is a delete refused because a read holds the snapshot: an
// export, a clone or a backup.
// It is an ErrPrecondition; Until is when the hold's lease ends, zero
// while a read is open (its end is not known). Backups names the backups
// reading the snapshot, if any: a backup may read for hours, and its end
// is a change of the engine (OnChange).
type HeldError struct {
	Snapshot string
	Why      string
	Until    time.Time
	Backups  []string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: snapshot %s %s", ErrPrecondition, e.Snapshot, e.Why)
}

func (e *HeldError) Unwrap() error { return ErrPrecondition }

// held says why snapshot name may not be deleted now; nil when it may.
func (e *Engine) held(name string) *HeldError {
	e.holdMu.Lock()
	defer e.holdMu.Unlock()
	now := e.clock.Now()
	for n, h := range e.holds {
		if !h.reading() && !now.Before(h.until) {
			delete(e.holds, n)
		}
	}
	h := e.holds[name]
	switch {
	case h == nil:
		return nil
	case h.reading():
		return &HeldError{Snapshot: name, Why: fmt.Sprintf("is being read by %s; delete it once that is done", h.who()), Backups: h.backupNames()}
	default:
		return &HeldError{Snapshot: name, Until: h.until, Why: fmt.Sprintf("is held until %s by an export (a backing image made from the volume, or a clone of it) that read it less than %s ago; delete it after that",
			h.until.UTC().Format(time.RFC3339), SnapshotHoldLease)}
	}
}

// logHeldDelete records a refused delete of a held snapshot.
func (e *Engine) logHeldDelete(name, why string) {
	e.log.WithFields(logrus.Fields{"snapshot": name, "reason": why}).Warn("Refused to delete a snapshot an export, a clone or a backup holds")
}
