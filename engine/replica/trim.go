package replica

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Trim gives back the space of the whole blocks in [off, off+length) that
// the head holds: it punches them out of the head file, after which each
// reads as the layer below holds it (or the backing file, or zeros). A
// trim leaves a range's content unspecified, and a filesystem trims only
// blocks it does not use (fstrim, a mount with discard), so what a block
// reads afterwards does not matter to it; what matters is that every
// replica reads the same, which each does, its chain being the same. The
// snapshots below are not touched: their data is what a revert or a
// backup of them reads. Blocks cut by either end of the range are left.
//
// A later snapshot's ChangedBlocks stays right: a punched block is no
// longer the head's, and it reads what the layer below holds.
func (r *Replica) Trim(off, length int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.chain == nil {
		return ErrClosed
	}
	if off < 0 || length < 0 || off+length > r.meta.Size {
		return fmt.Errorf("trim of %d+%d is outside the volume of %d bytes", off, length, r.meta.Size)
	}
	first, end := (off+BlockSize-1)/BlockSize, (off+length)/BlockSize
	headIdx := uint16(len(r.chain))
	head := r.chain[len(r.chain)-1]
	for b := first; b < end; {
		if r.location[b] != headIdx {
			b++
			continue
		}
		e := b
		for e < end && r.location[e] == headIdx {
			e++
		}
		if err := unix.Fallocate(int(head.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, b*BlockSize, (e-b)*BlockSize); err != nil {
			return fmt.Errorf("replica %s: punch blocks %d to %d out of the head: %w", r.dir, b, e, err)
		}
		if err := r.locateBelowHead(b, e); err != nil {
			return err
		}
		b = e
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
