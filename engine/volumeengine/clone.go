package volumeengine

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// CloneStatus is the progress of the engine's last clone.
type CloneStatus struct {
	IsCloning bool
	// Progress is the share, in percent, of the source's data copied.
	Progress int
	// State is in_progress, complete or error.
	State string
	Error string
	// Source names what is copied, snap://<volume>/<snapshot>.
	Source string
}

// cloneChunk is how much of the source one read and one write move.
const cloneChunk = 1 << 20

// Clone writes what view holds (a snapshot of another volume, opened with
// OpenSnapshotForRead on that volume's engine, which holds it meanwhile)
// into this volume, through every healthy replica; CloneStatus follows it.
// source names the snapshot, for the status and logs. Only the ranges the
// snapshot may hold data in are copied; the rest of a new volume reads as
// zeros already, and blocks an earlier attempt wrote there are zeroed
// first. The volume must be new, as for a restore: one with a frontend or
// snapshots is refused, and so is a view larger than the volume.
// Cancelling ctx stops it before its next chunk, as an error. The source
// is only read.
func (e *Engine) Clone(ctx context.Context, source string, view *replica.SnapshotView) error {
	e.called("Clone")
	if err := e.holdsNothing("a clone", "clone only into a new volume created with the data source"); err != nil {
		return err
	}
	if view.Size() > e.Size() {
		return fmt.Errorf("%w: %s holds %d bytes, more than volume %s's %d", ErrInvalid, source, view.Size(), e.name, e.Size())
	}
	if err := e.startClone(source); err != nil {
		return err
	}
	err := e.runClone(ctx, source, view)
	e.setClone(func(st *CloneStatus) {
		st.IsCloning = false
		if err != nil {
			st.State, st.Error = "error", err.Error()
			return
		}
		st.State, st.Progress = "complete", 100
	})
	return err
}

// runClone copies the view's data runs; a panic in it is the clone's
// error, so the status never stays in progress.
func (e *Engine) runClone(ctx context.Context, source string, view *replica.SnapshotView) (err error) {
	defer panics.Recover(e.log.WithFields(logrus.Fields{"clone": source}), &err)
	if err := e.zeroStale(ctx, view); err != nil {
		return err
	}
	var total int64
	view.DataRuns(0, view.Size(), func(start, end int64) { total += end - start })
	buf := make([]byte, cloneChunk)
	var copied int64
	view.DataRuns(0, view.Size(), func(start, end int64) {
		for off := start; off < end && err == nil; {
			if err = ctx.Err(); err != nil {
				err = fmt.Errorf("clone stopped: %w", err)
				return
			}
			p := buf[:min(int64(len(buf)), end-off)]
			if _, err = view.ReadAt(p, off); err != nil {
				err = fmt.Errorf("read %s at %d: %w", source, off, err)
				return
			}
			if _, err = e.WriteAt(p, off); err != nil {
				err = fmt.Errorf("write volume %s at %d: %w", e.name, off, err)
				return
			}
			off += int64(len(p))
			copied += int64(len(p))
			progress := int(copied * 100 / total)
			e.setClone(func(st *CloneStatus) { st.Progress = progress })
		}
	})
	if err != nil {
		return err
	}
	return e.Sync()
}

// zeroStale writes zeros over the blocks the volume holds where the view
// reads as zeros: a clone tried again after one that failed half way,
// whose source was meanwhile replaced by another of the same name, must
// not keep the first one's bytes. A new volume holds none, and writes
// nothing here.
func (e *Engine) zeroStale(ctx context.Context, view *replica.SnapshotView) error {
	e.mu.RLock()
	members := e.healthy()
	e.mu.RUnlock()
	if len(members) == 0 {
		return ErrNoHealthyReplica
	}
	// Every replica got every write, so the first holds what they do.
	r, _, err := e.layersOf("the blocks a clone overwrites", members)
	if err != nil {
		return err
	}
	written, err := r.Written()
	if err != nil {
		return err
	}
	data := make([]bool, len(written))
	view.DataRuns(0, view.Size(), func(start, end int64) {
		for b := start / replica.BlockSize; b*replica.BlockSize < end && b < int64(len(data)); b++ {
			data[b] = true
		}
	})
	zeros := make([]byte, cloneChunk)
	for b := 0; b < len(written); {
		if !written[b] || data[b] {
			b++
			continue
		}
		end := b
		for end < len(written) && written[end] && !data[end] && (end-b)*replica.BlockSize < cloneChunk {
			end++
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("clone stopped: %w", err)
		}
		off := int64(b) * replica.BlockSize
		if _, err := e.WriteAt(zeros[:(end-b)*replica.BlockSize], off); err != nil {
			return fmt.Errorf("write zeros into volume %s at %d: %w", e.name, off, err)
		}
		b = end
	}
	return nil
}

// startClone marks a clone of source in progress, unless a clone or a
// restore already runs.
func (e *Engine) startClone(source string) error {
	if url := e.restoring(); url != "" {
		return fmt.Errorf("%w: volume %s is being restored from %s", ErrPrecondition, e.name, url)
	}
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	if e.clone.IsCloning {
		return fmt.Errorf("%w: volume %s is being cloned already, from %s", ErrPrecondition, e.name, e.clone.Source)
	}
	e.clone = CloneStatus{IsCloning: true, State: "in_progress", Source: source}
	e.generation.Add(1)
	return nil
}

func (e *Engine) setClone(f func(*CloneStatus)) {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	f(&e.clone)
	e.generation.Add(1)
}

// CloneStatus reports the last clone.
func (e *Engine) CloneStatus() CloneStatus {
	e.called("CloneStatus")
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	return e.clone
}

// cloning is the source of the clone in progress, or "".
func (e *Engine) cloning() string {
	e.backupMu.Lock()
	defer e.backupMu.Unlock()
	if !e.clone.IsCloning {
		return ""
	}
	return e.clone.Source
}
