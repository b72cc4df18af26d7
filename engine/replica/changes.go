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
	r.mu.RLock()
	defer r.mu.RUnlock()
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
		if n == since && since != "" {
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
