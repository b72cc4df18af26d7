// Package replica is one copy of a volume's data: a chain of sparse layer
// files on a disk, the oldest at the bottom and a writable head on top.
// Reads fall through to the newest layer that holds each block; writes go
// to the head; a snapshot freezes the head and opens a new one, at a cost
// that does not grow with the volume's size.
package replica

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// BlockSize is the unit the replica tracks: a block is in a layer or not.
const BlockSize = 4096

// Replica is an open replica folder.
type Replica struct {
	mu   sync.RWMutex
	dir  string
	meta volumeMeta
	// chain is the head's ancestry, oldest first, the head last. A
	// snapshot layer no block reads from (it held nothing, or newer
	// layers cover all it holds) is not kept open: nil. Thirty empty
	// snapshots of 1,000 volumes would otherwise hold 30,000 files open.
	chain []*os.File
	// headWritten: the head holds a block, so it stays open when a
	// snapshot freezes it.
	headWritten bool
	// chainNames names the files of chain: snapshot names, then "".
	chainNames []string
	// location[b] is 1 + the index in chain of the newest layer holding
	// block b; 0 means no layer does and the block reads from the backing
	// file, or as zeros without one.
	location []uint16
	// backing reads the backing file; nil without one.
	backing backingReader

	// viewed counts, by snapshot name, the open views that read the
	// snapshot's layer (view_users.go). viewMu guards it: views open and
	// close under the shared lock.
	viewMu sync.Mutex
	viewed map[string]int

	// lock is the folder's lock (lock.go), held until Close.
	lock *os.File
}

// ErrNotFound is returned for a snapshot the replica does not have.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by every operation on a closed replica.
var ErrClosed = errors.New("replica is closed")

// Create makes a new, empty replica of size bytes in dir.
func Create(dir string, size int64) (*Replica, error) {
	return create(dir, size, nil)
}

func create(dir string, size int64, backing *BackingFile) (*Replica, error) {
	if size <= 0 || size%BlockSize != 0 {
		return nil, fmt.Errorf("size %d must be a positive multiple of %d", size, BlockSize)
	}
	if _, err := os.Stat(filepath.Join(dir, volumeMetaFile)); err == nil {
		return nil, fmt.Errorf("%s already holds a replica", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	// Under the lock: two creators at once make one replica, not two
	// interleaved.
	if _, err := os.Stat(filepath.Join(dir, volumeMetaFile)); err == nil {
		lock.Close()
		return nil, fmt.Errorf("%s already holds a replica", dir)
	}
	meta := volumeMeta{Size: size, BlockSize: BlockSize, HeadIndex: 0, Snapshots: map[string]*layerMeta{}, Backing: backing}
	if err := createSparse(filepath.Join(dir, headFile(0)), size); err != nil {
		lock.Close()
		return nil, err
	}
	if err := writeJSON(filepath.Join(dir, volumeMetaFile), meta); err != nil {
		lock.Close()
		return nil, err
	}
	return openLocked(dir, lock)
}

// Open opens the replica in dir, removing files a crash left behind. A
// replica another engine has open is refused (ErrLocked).
func Open(dir string) (*Replica, error) {
	if _, err := os.Stat(filepath.Join(dir, volumeMetaFile)); err != nil {
		return nil, fmt.Errorf("open replica %s: %w", dir, err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	return openLocked(dir, lock)
}

// openLocked opens the replica in dir, whose lock the caller took; the
// lock is the replica's from then on, released on failure.
func openLocked(dir string, lock *os.File) (r *Replica, err error) {
	defer func() {
		if err != nil {
			lock.Close()
		}
	}()
	r = &Replica{dir: dir, lock: lock}
	if err := readJSON(filepath.Join(dir, volumeMetaFile), &r.meta); err != nil {
		return nil, fmt.Errorf("open replica %s: %w", dir, err)
	}
	if r.meta.Snapshots == nil {
		r.meta.Snapshots = map[string]*layerMeta{}
	}
	if err := r.removeUnreferenced(); err != nil {
		return nil, err
	}
	if r.meta.Backing != nil {
		b, err := openBacking(r.meta.Backing)
		if err != nil {
			return nil, fmt.Errorf("open replica %s: %w", dir, err)
		}
		r.backing = b
	}
	if err := r.loadChain(); err != nil {
		r.closeChain()
		r.closeBacking()
		return nil, err
	}
	return r, nil
}

func createSparse(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// referenced lists the files the committed metadata refers to.
func (r *Replica) referenced() map[string]bool {
	out := map[string]bool{volumeMetaFile: true, lockFile: true, headFile(r.meta.HeadIndex): true}
	for name := range r.meta.Snapshots {
		out[snapshotFile(name)] = true
	}
	return out
}

// removeUnreferenced deletes layer files and temporary files that the
// committed metadata does not refer to: the leftovers of an operation a
// crash cut short.
func (r *Replica) removeUnreferenced() error {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return err
	}
	keep := r.referenced()
	for _, e := range entries {
		name := e.Name()
		ours := strings.HasSuffix(name, imgSuffix) || strings.HasPrefix(name, "."+volumeMetaFile+".tmp-")
		if ours && !keep[name] {
			if err := os.Remove(filepath.Join(r.dir, name)); err != nil {
				return err
			}
		}
	}
	return atomicfile.SyncDir(r.dir)
}

// ancestry is the head's chain of snapshot names, oldest first.
func (r *Replica) ancestry(top string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for name := top; name != ""; {
		if seen[name] {
			return nil, fmt.Errorf("replica %s: snapshot %s is its own ancestor", r.dir, name)
		}
		seen[name] = true
		m, ok := r.meta.Snapshots[name]
		if !ok {
			return nil, fmt.Errorf("replica %s: snapshot %s is missing from the metadata", r.dir, name)
		}
		names = append(names, name)
		name = m.Parent
	}
	for i, j := 0, len(names)-1; i < j; i, j = i+1, j-1 {
		names[i], names[j] = names[j], names[i]
	}
	return names, nil
}

// loadChain opens the head's ancestry and builds the block location map
// from the data extents of each layer, oldest first.
func (r *Replica) loadChain() error {
	names, err := r.ancestry(r.meta.HeadParent)
	if err != nil {
		return err
	}
	r.closeChain()
	r.chainNames = append(names, "")
	r.location = make([]uint16, r.meta.Size/BlockSize)
	for i, name := range r.chainNames {
		file := headFile(r.meta.HeadIndex)
		flag := os.O_RDWR
		if name != "" {
			file, flag = snapshotFile(name), os.O_RDONLY
		}
		f, err := os.OpenFile(filepath.Join(r.dir, file), flag, 0)
		if err != nil {
			return fmt.Errorf("replica %s: open layer: %w", r.dir, err)
		}
		r.chain = append(r.chain, f)
		idx := uint16(i + 1)
		if err := dataBlocks(f, r.meta.Size, func(b int64) { r.location[b] = idx }); err != nil {
			return fmt.Errorf("replica %s: scan %s: %w", r.dir, file, err)
		}
	}
	used := make([]bool, len(r.chain)+1)
	for _, idx := range r.location {
		used[idx] = true
	}
	last := len(r.chain) - 1
	r.headWritten = used[last+1]
	for i := 0; i < last; i++ {
		if !used[i+1] {
			r.chain[i].Close()
			r.chain[i] = nil
		}
	}
	return nil
}

func (r *Replica) closeChain() {
	for _, f := range r.chain {
		if f != nil {
			f.Close()
		}
	}
	r.chain, r.chainNames = nil, nil
}

func (r *Replica) closeBacking() {
	if r.backing != nil {
		r.backing.Close()
		r.backing = nil
	}
}

// Written marks the blocks some layer of the replica holds (the backing
// file's are not): those that may read other than zeros, or than the
// backing file.
func (r *Replica) Written() ([]bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.chain == nil {
		return nil, ErrClosed
	}
	out := make([]bool, len(r.location))
	for b, l := range r.location {
		out[b] = l != 0
	}
	return out, nil
}

// Size is the volume size in bytes; Grow changes it.
func (r *Replica) Size() int64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.meta.Size
}

// Close closes the layer files and the backing file.
func (r *Replica) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closeChain()
	r.closeBacking()
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
	return nil
}

func (r *Replica) checkRange(n int, off int64) error {
	if r.chain == nil {
		return ErrClosed
	}
	if off < 0 || off+int64(n) > r.meta.Size {
		return fmt.Errorf("range %d+%d is outside the volume of %d bytes", off, n, r.meta.Size)
	}
	return nil
}

// ReadAt reads from the newest layer that holds each block.
func (r *Replica) ReadAt(p []byte, off int64) (int, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if err := r.checkRange(len(p), off); err != nil {
		return 0, err
	}
	return len(p), r.readLocked(p, off)
}

func (r *Replica) readLocked(p []byte, off int64) error {
	for done := 0; done < len(p); {
		pos := off + int64(done)
		block := pos / BlockSize
		layer := r.location[block]
		// Extend the run over following blocks in the same layer.
		end := (block + 1) * BlockSize
		for end < off+int64(len(p)) && r.location[end/BlockSize] == layer {
			end += BlockSize
		}
		if end > off+int64(len(p)) {
			end = off + int64(len(p))
		}
		chunk := p[done : done+int(end-pos)]
		if layer == 0 {
			if err := readBacking(r.backing, chunk, pos); err != nil {
				return err
			}
		} else if err := readLayer(r.chain[layer-1], chunk, pos); err != nil {
			return err
		}
		done += len(chunk)
	}
	return nil
}

// readLayer reads a run of blocks a layer holds. A layer file is as long
// as the volume, so a short read (io.EOF before the end) means it was
// truncated: that is an error, never a read of whatever the buffer held.
func readLayer(f *os.File, p []byte, off int64) error {
	n, err := f.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return fmt.Errorf("layer %s: %d of %d bytes at offset %d: the file is shorter than the volume (truncated)", filepath.Base(f.Name()), n, len(p), off)
	}
	return err
}

// WriteAt writes to the head. A write that covers part of a block first
// fills the rest of the block from the chain, so the head always holds
// whole blocks.
func (r *Replica) WriteAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writeLocked(p, off)
}

func (r *Replica) writeLocked(p []byte, off int64) (int, error) {
	if err := r.checkRange(len(p), off); err != nil {
		return 0, err
	}
	start := off / BlockSize * BlockSize
	end := (off + int64(len(p)) + BlockSize - 1) / BlockSize * BlockSize
	buf := p
	if start != off || end != off+int64(len(p)) {
		buf = make([]byte, end-start)
		if err := r.readLocked(buf[:BlockSize], start); err != nil {
			return 0, err
		}
		if end-start > BlockSize {
			if err := r.readLocked(buf[len(buf)-BlockSize:], end-BlockSize); err != nil {
				return 0, err
			}
		}
		copy(buf[off-start:], p)
	}
	head := r.chain[len(r.chain)-1]
	if _, err := head.WriteAt(buf, start); err != nil {
		return 0, err
	}
	idx := uint16(len(r.chain))
	for b := start / BlockSize; b < end/BlockSize; b++ {
		r.location[b] = idx
	}
	r.headWritten = true
	return len(p), nil
}

// Sync makes the head's data durable.
func (r *Replica) Sync() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.syncLocked()
}

func (r *Replica) syncLocked() error {
	if r.chain == nil {
		return ErrClosed
	}
	return r.chain[len(r.chain)-1].Sync()
}

// Epoch is the replica's epoch: see volumeMeta.Epoch.
func (r *Replica) Epoch() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.meta.Epoch
}

// SetEpoch records the replica's epoch durably, with its data: the head is
// synced first, so a replica never has an epoch its data does not hold.
func (r *Replica) SetEpoch(epoch uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.setEpochLocked(epoch)
}

func (r *Replica) setEpochLocked(epoch uint64) error {
	if r.chain == nil {
		return ErrClosed
	}
	if err := r.chain[len(r.chain)-1].Sync(); err != nil {
		return err
	}
	next := r.cloneMeta()
	next.Epoch = epoch
	return r.commit(next)
}

// ReadEpoch reads the epoch of the replica in dir without opening it: an
// engine compares it with those of the replicas it opens.
func ReadEpoch(dir string) (uint64, error) {
	var meta volumeMeta
	if err := readJSON(filepath.Join(dir, volumeMetaFile), &meta); err != nil {
		return 0, err
	}
	return meta.Epoch, nil
}
