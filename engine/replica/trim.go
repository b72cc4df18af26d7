package replica

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Trim gives back the space of the whole blocks in [off, off+length) that
// the head holds, and those that the snapshots already removed just below
// the head hold: it punches them out of those files, after which each
// block reads as the layer below them holds it (the newest snapshot kept,
// or the backing file, or zeros). A trim leaves a range's content
// unspecified, and a filesystem trims only blocks it does not use
// (fstrim, a mount with discard), so what a block reads afterwards does
// not matter to it; what matters is that every replica reads the same,
// which each does, its chain and its removed marks being the same. A
// removed snapshot between the head and the newest kept one is read by
// nothing but the head (it cannot be reverted to or backed up, and a
// purge would merge it into the head), so its blocks in the range are the
// head's to give back, as Longhorn's engine does. Snapshots kept are not
// touched: their data is what a revert or a backup of them reads. Blocks
// cut by either end of the range are left.
//
// A removed snapshot that an open view reads (ViewedSnapshots) is kept
// like a snapshot not removed, with every layer under it: a backup or an
// export reads it in place, and a punch would turn what it has still to
// read into zeros. The engine trims every replica keeping the snapshots
// any of them views (TrimKeeping), so that they all read the same.
//
// A later snapshot's ChangedBlocks stays right: a punched block is no
// longer in any layer above the snapshot kept, and it reads what that
// layer holds.
func (r *Replica) Trim(off, length int64) error {
	return r.TrimKeeping(off, length, nil)
}

// TrimKeeping is Trim keeping the snapshots named in keep too, as if a
// view of this replica read them.
func (r *Replica) TrimKeeping(off, length int64, keep []string) error {
	kept := keptSet(keep)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.trimLocked(off, length, kept)
}

func (r *Replica) trimLocked(off, length int64, kept map[string]bool) error {
	if r.chain == nil {
		return ErrClosed
	}
	if off < 0 || length < 0 || off+length > r.meta.Size {
		return fmt.Errorf("trim of %d+%d is outside the volume of %d bytes", off, length, r.meta.Size)
	}
	first, end := (off+BlockSize-1)/BlockSize, (off+length)/BlockSize
	// Layers [top, head] are the head and the removed snapshots just
	// below it that no view reads; location holds a layer's index plus
	// one.
	top := r.removedBelowHead(kept)
	for b := first; b < end; {
		if int(r.location[b]) <= top {
			b++
			continue
		}
		e := b
		for e < end && int(r.location[e]) > top {
			e++
		}
		for i := top; i < len(r.chain); i++ {
			if err := r.punchLayer(i, b, e); err != nil {
				return err
			}
		}
		if err := r.locateBelowHead(b, e); err != nil {
			return err
		}
		b = e
	}
	return nil
}

// removedBelowHead is the chain index of the oldest of the snapshots
// marked removed just below the head with no kept snapshot between; the
// head's index when the snapshot below it is kept (or there is none). A
// removed snapshot a view reads, or named in keep, counts as kept.
func (r *Replica) removedBelowHead(keep map[string]bool) int {
	top := len(r.chain) - 1
	for top > 0 {
		name := r.chainNames[top-1]
		m := r.meta.Snapshots[name]
		if m == nil || !m.Removed || r.viewedOrKept(name, keep) {
			break
		}
		top--
	}
	return top
}

// punchLayer punches blocks [from, to) out of chain layer i: the head's
// open file, or a removed snapshot's file opened for the punch (its layer
// is open read-only, or closed when newer layers shadow all its blocks).
func (r *Replica) punchLayer(i int, from, to int64) error {
	f, name := r.chain[i], "the head"
	if i < len(r.chain)-1 {
		name = "removed snapshot " + r.chainNames[i]
		var err error
		if f, err = os.OpenFile(filepath.Join(r.dir, snapshotFile(r.chainNames[i])), os.O_RDWR, 0); err != nil {
			return fmt.Errorf("replica %s: open %s to trim it: %w", r.dir, name, err)
		}
		defer f.Close()
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, from*BlockSize, (to-from)*BlockSize); err != nil {
		return fmt.Errorf("replica %s: punch blocks %d to %d out of %s: %w", r.dir, from, to, name, err)
	}
	return nil
}

// locateBelowHead points the blocks [from, to), punched out of the head,
// at the newest layer below it that holds each, 0 (the backing file or
// zeros) when none does. A layer that held no block the map pointed at
// was closed; it is opened again when it now holds one.
func (r *Replica) locateBelowHead(from, to int64) error {
	found := make([]bool, to-from)
	for b := from; b < to; b++ {
		r.location[b] = 0
	}
	for i := len(r.chain) - 2; i >= 0; i-- {
		f, opened, err := r.layerForScan(i)
		if err != nil {
			return err
		}
		used := false
		err = dataBlocksIn(f, from*BlockSize, to*BlockSize, func(b int64) {
			if b < from || b >= to || found[b-from] {
				return
			}
			found[b-from] = true
			r.location[b] = uint16(i + 1)
			used = true
		})
		switch {
		case err != nil:
			if opened {
				f.Close()
			}
			return fmt.Errorf("replica %s: scan layer %s: %w", r.dir, f.Name(), err)
		case opened && used:
			r.chain[i] = f
		case opened:
			f.Close()
		}
	}
	return nil
}

// layerForScan is the open file of chain layer i, opening it read-only
// when it was closed (opened reports that).
func (r *Replica) layerForScan(i int) (f *os.File, opened bool, err error) {
	if r.chain[i] != nil {
		return r.chain[i], false, nil
	}
	f, err = os.Open(filepath.Join(r.dir, snapshotFile(r.chainNames[i])))
	if err != nil {
		return nil, false, fmt.Errorf("replica %s: open layer %s: %w", r.dir, r.chainNames[i], err)
	}
	return f, true, nil
}

func keptSet(keep []string) map[string]bool {
	kept := make(map[string]bool, len(keep))
	for _, n := range keep {
		kept[n] = true
	}
	return kept
}
