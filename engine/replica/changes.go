package replica

import (
	"fmt"
	"os"
	"path/filepath"
)

// ChangedBlocks reports which 4 KiB blocks may differ between snapshot
// since and snapshot name: those written in the layers above since in
// name's ancestry. When since is empty or not an ancestor of name (it was
// purged, or the volume was reverted past it), every block holding data
// in name's ancestry counts as changed, and full is true.
func (r *Replica) ChangedBlocks(since, name string) (changed []bool, full bool, err error) {
	return r.changedBlocks(func(n string, _ *layerMeta) bool { return since != "" && n == since }, name)
}

// ChangedBlocksByID is ChangedBlocks with both snapshots named by their
// IDs: a snapshot that merely took the name of another (the name was freed
// by a purge) is not mistaken for it. When sinceID matches no ancestor
// (or is empty), full is true.
func (r *Replica) ChangedBlocksByID(sinceID, id string) (changed []bool, full bool, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	name := ""
	for n, m := range r.meta.Snapshots {
		if id != "" && m.ID == id {
			name = n
		}
	}
	if name == "" {
		return nil, false, fmt.Errorf("snapshot with ID %q: %w", id, ErrNotFound)
	}
	return r.changedBlocksLocked(func(_ string, m *layerMeta) bool { return sinceID != "" && m.ID == sinceID }, name)
}

func (r *Replica) changedBlocks(isSince func(name string, m *layerMeta) bool, name string) (changed []bool, full bool, err error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changedBlocksLocked(isSince, name)
}

func (r *Replica) changedBlocksLocked(isSince func(name string, m *layerMeta) bool, name string) (changed []bool, full bool, err error) {
	if r.chain == nil {
		return nil, false, ErrClosed
	}
	if _, ok := r.meta.Snapshots[name]; !ok {
		return nil, false, fmt.Errorf("snapshot %q: %w", name, ErrNotFound)
	}
	names, err := r.ancestry(name)
	if err != nil {
		return nil, false, err
	}
	from, full := 0, true
	for i, n := range names {
		if isSince(n, r.meta.Snapshots[n]) {
			from, full = i+1, false
		}
	}
	changed = make([]bool, r.meta.Size/BlockSize)
	for _, n := range names[from:] {
		f, err := os.Open(filepath.Join(r.dir, snapshotFile(n)))
		if err != nil {
			return nil, false, err
		}
		err = dataBlocks(f, r.meta.Size, func(b int64) { changed[b] = true })
		f.Close()
		if err != nil {
			return nil, false, err
		}
	}
	return changed, full, nil
}
