package volumeengine

import (
	"fmt"
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
	readers int
	until   time.Time
}

// OpenSnapshotForRead opens a read-only view of [off, end) of snapshot
// name (end < 0: to the volume's end) on the first healthy replica and
// holds the snapshot: deleting it is refused
// while the view is open and for SnapshotHoldLease after release, which
// closes the view. A snapshot marked removed cannot be opened: a purge
// may be about to merge it away.
func (e *Engine) OpenSnapshotForRead(name string, off, end int64) (*replica.SnapshotView, func(), error) {
	e.called("OpenSnapshotForRead")
	return e.openSnapshot(name, off, end, SnapshotHoldLease)
}

// OpenSnapshotForClone opens a read-only view of the whole of snapshot
// name, held while the view is open and not after: a clone reads it in
// one go, so its snapshot may be deleted as soon as the clone is done.
func (e *Engine) OpenSnapshotForClone(name string) (*replica.SnapshotView, func(), error) {
	e.called("OpenSnapshotForClone")
	return e.openSnapshot(name, 0, -1, 0)
}

// openSnapshot opens the view and holds the snapshot while it is open
// and for lease after.
func (e *Engine) openSnapshot(name string, off, end int64, lease time.Duration) (*replica.SnapshotView, func(), error) {
	if name == replica.HeadName {
		return nil, nil, fmt.Errorf("%w: %s is not a snapshot: take one and read that", ErrInvalid, replica.HeadName)
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	members := e.healthy()
	if len(members) == 0 {
		return nil, nil, ErrNoHealthyReplica
	}
	r := members[0].r
	exists, removed := r.SnapshotRemoved(name)
	switch {
	case !exists:
		return nil, nil, fmt.Errorf("%w: snapshot %s", ErrNotFound, name)
	case removed:
		return nil, nil, fmt.Errorf("%w: snapshot %s is deleted (marked removed), it cannot be read", ErrPrecondition, name)
	}
	// A snapshot taken before the volume grew has the size it had then.
	if size, _ := r.SnapshotVolumeSize(name); off < 0 || off > size || end > size || (end >= 0 && end < off) {
		return nil, nil, fmt.Errorf("%w: range offset %d to %d: must lie within the snapshot's %d bytes", ErrInvalid, off, end, size)
	}
	view, err := r.OpenSnapshotRange(name, off, end)
	if err != nil {
		e.fail(members[0], err)
		return nil, nil, fmt.Errorf("snapshot %s on replica %s: %w", name, members[0].name, err)
	}
	e.holdMu.Lock()
	if e.holds == nil {
		e.holds = map[string]*snapshotHold{}
	}
	h := e.holds[name]
	if h == nil {
		h = &snapshotHold{}
		e.holds[name] = h
	}
	h.readers++
	e.holdMu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			view.Close()
			e.holdMu.Lock()
			h.readers--
			// A shorter lease never cuts another reader's.
			if until := e.clock.Now().Add(lease); until.After(h.until) {
				h.until = until
			}
			e.holdMu.Unlock()
		})
	}
	return view, release, nil
}

// HeldError is a delete refused because an export holds the snapshot.
// It is an ErrPrecondition; Until is when the hold's lease ends, zero
// while a read is open (its end is not known).
type HeldError struct {
	Snapshot string
	Why      string
	Until    time.Time
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
		if h.readers == 0 && !now.Before(h.until) {
			delete(e.holds, n)
		}
	}
	h := e.holds[name]
	switch {
	case h == nil:
		return nil
	case h.readers > 0:
		return &HeldError{Snapshot: name, Why: fmt.Sprintf("is being read by %d export(s) (a backing image made from the volume, or a clone of it); delete it once the export is done", h.readers)}
	default:
		return &HeldError{Snapshot: name, Until: h.until, Why: fmt.Sprintf("is held until %s by an export (a backing image made from the volume, or a clone of it) that read it less than %s ago; delete it after that",
			h.until.UTC().Format(time.RFC3339), SnapshotHoldLease)}
	}
}

// logHeldDelete records a refused delete of a held snapshot.
func (e *Engine) logHeldDelete(name, why string) {
	e.log.WithFields(logrus.Fields{"snapshot": name, "reason": why}).Warn("Refused to delete a snapshot an export holds")
}
