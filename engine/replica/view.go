package replica

import (
	"fmt"
	"os"
	"path/filepath"
)

// SnapshotView reads what a snapshot holds: its layer and its ancestors',
// within a window of the volume (the whole volume, or the range it was
// opened for). It reads what the snapshot held until it is closed, a
// purge or a trim of the snapshot meanwhile included (view_users.go).
type SnapshotView struct {
	size int64
	// from and to bound the window, block-aligned; location maps its
	// blocks (the first is from/BlockSize) to the layer holding them, 0
	// for none (the backing file or zeros).
	from, to int64
	files    []*os.File
	location []uint16
	// backing is the view's own reader of the replica's backing file, so
	// the view outlives a close of the replica.
	backing backingReader
	// id and created are the snapshot's, read with the layers.
	id, created string
	// release tells the replica the view no longer reads its layers.
	release func()
}

// ID is the snapshot's identity (see Snapshot.ID).
func (v *SnapshotView) ID() string { return v.id }

// Created is the snapshot's creation time, RFC 3339.
func (v *SnapshotView) Created() string { return v.created }

// OpenSnapshot returns a read-only view of snapshot name, all of it. Its
// cost follows the volume's size and the data its layers hold: a reader of
// one range opens that range instead.
func (r *Replica) OpenSnapshot(name string) (*SnapshotView, error) {
	return r.OpenSnapshotRange(name, 0, -1)
}

// OpenSnapshotRange returns a read-only view of snapshot name that reads
// [off, end) (widened to whole blocks); end < 0 means the volume's end.
// Its cost follows the range, not the volume: an export reads a snapshot
// range after range, each through a view of its own.
func (r *Replica) OpenSnapshotRange(name string, off, end int64) (*SnapshotView, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.chain == nil {
		return nil, ErrClosed
	}
	meta, ok := r.meta.Snapshots[name]
	if !ok {
		return nil, fmt.Errorf("snapshot %q: %w", name, ErrNotFound)
	}
	names, err := r.ancestry(name)
	if err != nil {
		return nil, err
	}
	size := r.snapshotSize(meta)
	if end < 0 {
		end = size
	}
	if off < 0 || off > end || end > size {
		return nil, fmt.Errorf("range %d to %d is outside the volume of %d bytes", off, end, size)
	}
	from, to := off/BlockSize*BlockSize, (end+BlockSize-1)/BlockSize*BlockSize
	v := &SnapshotView{size: size, from: from, to: to, location: make([]uint16, (to-from)/BlockSize), id: meta.ID, created: meta.Created}
	if r.meta.Backing != nil {
		if v.backing, err = openBacking(r.meta.Backing); err != nil {
			return nil, err
		}
	}
	for i, n := range names {
		f, err := os.Open(filepath.Join(r.dir, snapshotFile(n)))
		if err != nil {
			v.Close()
			return nil, err
		}
		v.files = append(v.files, f)
		idx := uint16(i + 1)
		first := from / BlockSize
		if err := dataBlocksIn(f, from, to, func(b int64) { v.location[b-first] = idx }); err != nil {
			v.Close()
			return nil, err
		}
	}
	// Under the replica's lock: a trim either ran before the view read
	// the layers or sees the view.
	v.release = r.viewLayers(names)
	return v, nil
}

// ReadAt reads the snapshot's content.
func (v *SnapshotView) ReadAt(p []byte, off int64) (int, error) {
	if off < v.from || off+int64(len(p)) > v.to {
		return 0, fmt.Errorf("range %d+%d is outside the view's %d to %d (volume of %d bytes)", off, len(p), v.from, v.to, v.size)
	}
	end := off + int64(len(p))
	for done := 0; done < len(p); {
		pos := off + int64(done)
		layer := v.layer(pos)
		// One read for the run of following blocks in the same layer.
		next := (pos/BlockSize + 1) * BlockSize
		for next < end && v.layer(next) == layer {
			next += BlockSize
		}
		n := min(next, end) - pos
		chunk := p[done : done+int(n)]
		if layer == 0 {
			if err := readBacking(v.backing, chunk, pos); err != nil {
				return done, err
			}
		} else if err := readLayer(v.files[layer-1], chunk, pos); err != nil {
			return done, err
		}
		done += int(n)
	}
	return len(p), nil
}

// layer is the index of the layer holding the byte at pos, in the window.
func (v *SnapshotView) layer(pos int64) uint16 { return v.location[(pos-v.from)/BlockSize] }

// Size is the volume size.
func (v *SnapshotView) Size() int64 { return v.size }

// Close closes the view's files; a trim may punch its layers from then.
func (v *SnapshotView) Close() error {
	if v.release != nil {
		v.release()
	}
	for _, f := range v.files {
		f.Close()
	}
	if v.backing != nil {
		v.backing.Close()
	}
	return nil
}

// Allocated marks the blocks of the view's window that the snapshot's
// layers hold (the backing file's are not), first block first: what this
// very view reads, whatever its snapshot's name has come to mean since.
func (v *SnapshotView) Allocated() []bool {
	out := make([]bool, len(v.location))
	for i, layer := range v.location {
		out[i] = layer != 0
	}
	return out
}

// DataRuns calls fn for every run of [off, end) that may hold data: the
// blocks some layer holds, and those the backing file covers. The rest
// reads as zeros, so a reader of the snapshot may skip it. The range is
// cut to the view's window.
func (v *SnapshotView) DataRuns(off, end int64, fn func(start, end int64)) {
	off, end = max(off, v.from), min(end, v.size, v.to)
	var backingEnd int64
	if v.backing != nil {
		backingEnd = v.backing.Size()
	}
	data := func(b int64) bool { return v.layer(b*BlockSize) != 0 || b*BlockSize < backingEnd }
	start := int64(-1)
	for b := off / BlockSize; b*BlockSize < end; b++ {
		switch has := data(b); {
		case has && start < 0:
			start = max(b*BlockSize, off)
		case !has && start >= 0:
			fn(start, b*BlockSize)
			start = -1
		}
	}
	if start >= 0 {
		fn(start, end)
	}
}
