package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrShrink is Grow's error for a size below the replica's: a volume
// never shrinks, as that would drop the data past the new end.
var ErrShrink = errors.New("a volume never shrinks")

// Grow makes the volume size bytes long; the new space reads as zeros
// (or from the backing file, where it is longer than the old size, which
// CreateOnBacking forbids). A size below the current one is refused
// (ErrShrink), the same size is a no-op.
//
// It is crash-safe: the head file is extended first (the old metadata
// reads no further than the old size, so a longer head changes nothing it
// reads), then the metadata's new size is committed in one atomic write.
// A replica that stops at any step opens at the old size or the new one.
// The snapshots keep the size they were taken at: each records it, so a
// view of one, and a backup of it, has the size the volume had then.
func (r *Replica) Grow(size int64) error {
	return r.grow(size, noStep)
}

func (r *Replica) grow(size int64, after step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.growLocked(size, after)
}

func (r *Replica) growLocked(size int64, after step) error {
	if r.chain == nil {
		return ErrClosed
	}
	if size%BlockSize != 0 {
		return fmt.Errorf("size %d must be a multiple of %d", size, BlockSize)
	}
	if size < r.meta.Size {
		return fmt.Errorf("size %d is below the volume's %d bytes: %w", size, r.meta.Size, ErrShrink)
	}
	if size == r.meta.Size {
		return nil
	}
	head := r.chain[len(r.chain)-1]
	if err := head.Truncate(size); err != nil {
		return fmt.Errorf("replica %s: extend the head to %d bytes: %w", r.dir, size, err)
	}
	if err := head.Sync(); err != nil {
		return err
	}
	if err := after("extend head"); err != nil {
		return err
	}
	next := r.cloneMeta()
	for _, m := range next.Snapshots {
		if m.Size == 0 {
			m.Size = r.meta.Size
		}
	}
	next.Size = size
	if err := r.commit(next); err != nil {
		return err
	}
	r.location = append(r.location, make([]uint16, (size-int64(len(r.location))*BlockSize)/BlockSize)...)
	return nil
}

// snapshotSize is the size the volume had when snapshot m was taken: the
// one it records, or, for one taken before the volume last grew and
// recorded none, the volume's size (no growth has happened since).
func (r *Replica) snapshotSize(m *layerMeta) int64 {
	if m.Size > 0 {
		return m.Size
	}
	return r.meta.Size
}

// ReadSize reads the size of the replica in dir without opening it.
func ReadSize(dir string) (int64, error) {
	var meta volumeMeta
	if err := readJSON(filepath.Join(dir, volumeMetaFile), &meta); err != nil {
		return 0, err
	}
	return meta.Size, nil
}

// headLength is the length of the head file, for tests.
func (r *Replica) headLength() (int64, error) {
	st, err := os.Stat(filepath.Join(r.dir, headFile(r.meta.HeadIndex)))
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// SnapshotVolumeSize is the size the volume had when snapshot name was
// taken; false when there is no such snapshot.
func (r *Replica) SnapshotVolumeSize(name string) (int64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.meta.Snapshots[name]
	if !ok {
		return 0, false
	}
	return r.snapshotSize(m), true
}
