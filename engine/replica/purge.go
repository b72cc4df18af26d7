package replica

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// copyChunk bounds one read and write while merging layers.
const copyChunk = 1 << 20

// Purge removes the data of snapshots marked removed. A removed snapshot
// with one child, a snapshot or the head, is merged into that child: the
// child keeps its own blocks and gains the ones only the removed snapshot
// had, so nothing any remaining snapshot or the head reads changes. A
// removed snapshot nothing descends from is dropped. A removed snapshot
// with several children (the head and a snapshot, after a revert) stays
// until that changes.
//
// The purge holds the replica's lock: writes to the head wait for it, so
// a merge into the head never races a write.
func (r *Replica) Purge() ([]string, error) {
	return r.purge(noStep)
}

func (r *Replica) purge(after step) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.purgeLocked(after)
}

func (r *Replica) purgeLocked(after step) ([]string, error) {
	if r.chain == nil {
		return nil, ErrClosed
	}
	var purged []string
	tried := false
	for {
		name, child, ok := r.nextPurgeable()
		if !ok {
			break
		}
		tried = true
		if err := r.purgeOne(name, child, after); err != nil {
			// The metadata may have changed before the error: the chain
			// follows what is committed.
			if lerr := r.loadChain(); lerr != nil {
				err = fmt.Errorf("%w; then %v", err, lerr)
			}
			return purged, fmt.Errorf("purge snapshot %s: %w", name, err)
		}
		purged = append(purged, name)
	}
	if tried {
		if err := r.loadChain(); err != nil {
			return purged, err
		}
	}
	return purged, nil
}

// nextPurgeable finds a removed snapshot that can go, oldest name first so
// the order is stable; child is "" when nothing descends from it, HeadName
// when the head alone does.
func (r *Replica) nextPurgeable() (name, child string, ok bool) {
	children := map[string][]string{}
	for n, m := range r.meta.Snapshots {
		children[m.Parent] = append(children[m.Parent], n)
	}
	var names []string
	for n, m := range r.meta.Snapshots {
		if m.Removed {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		kids := children[n]
		headIsChild := r.meta.HeadParent == n
		switch {
		case len(kids) == 0 && !headIsChild:
			return n, "", true
		case len(kids) == 1 && !headIsChild:
			return n, kids[0], true
		case len(kids) == 0 && headIsChild:
			return n, HeadName, true
		}
	}
	return "", "", false
}

// purgeOne merges snapshot name into child (a snapshot, HeadName for the
// head, "" for none), commits the metadata without it, then removes its
// file. The merge only adds to the child blocks that read the same
// through the chain, so a crash before the commit changes nothing anyone
// reads; after the commit, Open removes the file nothing references.
func (r *Replica) purgeOne(name, child string, after step) error {
	switch child {
	case "":
	case HeadName:
		if err := r.mergeInto(name, headFile(r.meta.HeadIndex)); err != nil {
			return err
		}
		if err := after("merge into head"); err != nil {
			return err
		}
	default:
		if err := r.mergeInto(name, snapshotFile(child)); err != nil {
			return err
		}
		if err := after("merge"); err != nil {
			return err
		}
	}
	next := r.cloneMeta()
	switch child {
	case "":
	case HeadName:
		next.HeadParent = next.Snapshots[name].Parent
	default:
		next.Snapshots[child].Parent = next.Snapshots[name].Parent
	}
	delete(next.Snapshots, name)
	if err := r.commit(next); err != nil {
		return err
	}
	if err := after("commit"); err != nil {
		return err
	}
	return os.Remove(filepath.Join(r.dir, snapshotFile(name)))
}

// mergeInto copies into the layer file childFile (a snapshot's, or the
// head's) the blocks of snapshot name that the child lacks, and syncs it.
// It may be cut short at any point: a copied block holds what reads of the
// child already returned through the chain, so a partial merge changes
// nothing anyone reads, and the next purge completes it. The caller holds
// the replica's lock, so no write to the head comes in between.
func (r *Replica) mergeInto(name, childFile string) error {
	src, err := os.Open(filepath.Join(r.dir, snapshotFile(name)))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(r.dir, childFile), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer dst.Close()

	blocks := r.meta.Size / BlockSize
	has := make([]bool, blocks)
	if err := dataBlocks(dst, r.meta.Size, func(b int64) { has[b] = true }); err != nil {
		return err
	}
	buf := make([]byte, copyChunk)
	var copyErr error
	copyRun := func(first, last int64) {
		for off := first * BlockSize; off < last*BlockSize && copyErr == nil; off += copyChunk {
			n := min(int64(copyChunk), last*BlockSize-off)
			if _, err := src.ReadAt(buf[:n], off); err != nil {
				copyErr = err
				return
			}
			if _, err := dst.WriteAt(buf[:n], off); err != nil {
				copyErr = err
				return
			}
		}
	}
	if err := dataExtents(src, r.meta.Size, func(start, end int64) {
		run := int64(-1)
		for b := start / BlockSize; b < (end+BlockSize-1)/BlockSize; b++ {
			switch {
			case !has[b] && run < 0:
				run = b
			case has[b] && run >= 0:
				copyRun(run, b)
				run = -1
			}
		}
		if run >= 0 {
			copyRun(run, (end+BlockSize-1)/BlockSize)
		}
	}); err != nil {
		return err
	}
	if copyErr != nil {
		return copyErr
	}
	return dst.Sync()
}

// Revert makes the head an empty layer on top of snapshot name: the volume
// reads what the snapshot held. What the old head held is discarded.
func (r *Replica) Revert(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.revertLocked(name)
}

func (r *Replica) revertLocked(name string) error {
	if r.chain == nil {
		return ErrClosed
	}
	if _, ok := r.meta.Snapshots[name]; !ok {
		return fmt.Errorf("snapshot %q: %w", name, ErrNotFound)
	}
	oldHead := headFile(r.meta.HeadIndex)
	if err := createSparse(filepath.Join(r.dir, headFile(r.meta.HeadIndex+1)), r.meta.Size); err != nil {
		return err
	}
	next := r.cloneMeta()
	next.HeadParent = name
	next.HeadIndex++
	if err := r.commit(next); err != nil {
		os.Remove(filepath.Join(r.dir, headFile(r.meta.HeadIndex+1)))
		return err
	}
	if err := os.Remove(filepath.Join(r.dir, oldHead)); err != nil {
		return err
	}
	return r.loadChain()
}
