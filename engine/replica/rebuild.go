package replica

// A rebuild copies a healthy replica's snapshots into a new, empty one
// while the volume is in use (docs/design-data-plane.md, "Failure and
// rebuild"). The source holds the layers it is read from (Layers); the
// target takes each layer's data extents (WriteLayer) and then the
// chain's metadata, last (InstallChain). From BeginRebuild until
// InstallChain the target's volume.meta says it is being rebuilt, so a
// rebuild cut short, by a crash or a failure, never leaves a replica that
// an engine takes for current; and layer files written for snapshots its
// metadata does not list yet are removed when it is next opened.

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// ErrNotRebuilding marks a rebuild's write or install on a replica that
// is not being rebuilt (BeginRebuild was not called, or the chain is
// installed already): a complete replica's layers are never written.
var ErrNotRebuilding = errors.New("the replica is not being rebuilt")

// Extent is a range of a layer file that holds data, [Start, End).
type Extent struct{ Start, End int64 }

// LayerMeta is one snapshot of a chain, as a rebuild copies it.
type LayerMeta struct {
	Name        string            `json:"name"`
	ID          string            `json:"id,omitempty"`
	Parent      string            `json:"parent"`
	Removed     bool              `json:"removed"`
	UserCreated bool              `json:"userCreated"`
	Created     string            `json:"created"`
	Labels      map[string]string `json:"labels,omitempty"`
	// VolumeSize is the volume's size when the snapshot was taken (0:
	// the volume's); DataSize the bytes of data its layer holds.
	VolumeSize int64 `json:"volumeSize,omitempty"`
	DataSize   int64 `json:"dataSize"`
}

// ChainMeta is what a rebuild copies of a replica's metadata: every
// snapshot (the whole tree, so that a deletion or a revert finds the same
// snapshots on every replica), the snapshot the rebuild was taken at
// (Top), the volume's size and the backing file.
type ChainMeta struct {
	Top       string       `json:"top"`
	Size      int64        `json:"size"`
	Snapshots []LayerMeta  `json:"snapshots"`
	Backing   *BackingFile `json:"backing,omitempty"`
}

// Layers is a rebuild's source: the layer files of every snapshot of a
// replica, opened at one instant and held as a view holds them (a trim
// keeps them; view_users.go) until Close.
type Layers struct {
	chain   ChainMeta
	files   map[string]*os.File
	sizes   map[string]int64
	release func()
}

// OpenLayers holds the layers of every snapshot of the replica for a
// rebuild taken at snapshot top, and returns them with the chain's
// metadata as it is now.
func (r *Replica) OpenLayers(top string) (*Layers, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.chain == nil {
		return nil, ErrClosed
	}
	if _, ok := r.meta.Snapshots[top]; !ok {
		return nil, fmt.Errorf("snapshot %q: %w", top, ErrNotFound)
	}
	l := &Layers{chain: ChainMeta{Top: top, Size: r.meta.Size, Backing: r.meta.Backing}, files: map[string]*os.File{}, sizes: map[string]int64{}}
	names := make([]string, 0, len(r.meta.Snapshots))
	for name := range r.meta.Snapshots {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		m := r.meta.Snapshots[name]
		f, err := os.Open(filepath.Join(r.dir, snapshotFile(name)))
		if err != nil {
			l.Close()
			return nil, err
		}
		l.files[name] = f
		size := r.snapshotSize(m)
		l.sizes[name] = size
		var data int64
		if err := dataExtents(f, size, func(s, e int64) { data += e - s }); err != nil {
			l.Close()
			return nil, err
		}
		l.chain.Snapshots = append(l.chain.Snapshots, LayerMeta{Name: name, ID: m.ID, Parent: m.Parent, Removed: m.Removed,
			UserCreated: m.UserCreated, Created: m.Created, Labels: m.Labels, VolumeSize: m.Size, DataSize: data})
	}
	l.release = r.viewLayers(names)
	return l, nil
}

// Chain is the chain's metadata as it was when the layers were opened.
func (l *Layers) Chain() ChainMeta { return l.chain }

// Extents lists at most max extents of snapshot name's layer from from
// on, and where the next call starts: -1 once the layer is done.
func (l *Layers) Extents(name string, from int64, max int) ([]Extent, int64, error) {
	f, ok := l.files[name]
	if !ok {
		return nil, -1, fmt.Errorf("layer of snapshot %q: %w", name, ErrNotFound)
	}
	size := l.sizes[name]
	if from < 0 || from > size || max <= 0 {
		return nil, -1, fmt.Errorf("extents of snapshot %q from %d (at most %d): outside its %d bytes", name, from, max, size)
	}
	var out []Extent
	next := int64(-1)
	errFull := errors.New("full")
	err := dataExtentsInUntil(f, from, size, func(s, e int64) error {
		if len(out) == max {
			next = s
			return errFull
		}
		out = append(out, Extent{s, e})
		return nil
	})
	if err != nil && err != errFull {
		return nil, -1, err
	}
	return out, next, nil
}

// ReadLayer reads p at off of snapshot name's layer itself (not what the
// snapshot reads through its ancestors) and returns its SHA-256.
func (l *Layers) ReadLayer(name string, p []byte, off int64) ([sha256.Size]byte, error) {
	f, ok := l.files[name]
	if !ok {
		return [sha256.Size]byte{}, fmt.Errorf("layer of snapshot %q: %w", name, ErrNotFound)
	}
	if off < 0 || off+int64(len(p)) > l.sizes[name] {
		return [sha256.Size]byte{}, fmt.Errorf("range %d+%d is outside snapshot %q's %d bytes", off, len(p), name, l.sizes[name])
	}
	if err := readLayer(f, p, off); err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(p), nil
}

// Close ends the hold and closes the files.
func (l *Layers) Close() error {
	if l.release != nil {
		l.release()
	}
	for _, f := range l.files {
		f.Close()
	}
	return nil
}

// dataExtentsInUntil is dataExtentsIn with fn able to stop the walk (its
// error is returned).
func dataExtentsInUntil(f *os.File, from, size int64, fn func(start, end int64) error) error {
	var stop error
	err := dataExtentsIn(f, from, size, func(s, e int64) {
		if stop == nil {
			stop = fn(s, e)
		}
	})
	if stop != nil {
		return stop
	}
	return err
}

// Rebuilding tells whether the replica is being rebuilt: its chain is not
// complete, and no engine may take it for current.
func (r *Replica) Rebuilding() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.meta.Rebuilding
}

// BeginRebuild records durably that the replica is being rebuilt. Only a
// new replica, without a snapshot, is rebuilt: a failed one that comes
// back is not reused yet.
func (r *Replica) BeginRebuild() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.beginRebuildLocked()
}

func (r *Replica) beginRebuildLocked() error {
	if r.chain == nil {
		return ErrClosed
	}
	if len(r.meta.Snapshots) > 0 {
		return fmt.Errorf("replica %s has %d snapshots: only a new, empty replica is rebuilt", r.dir, len(r.meta.Snapshots))
	}
	if r.meta.Rebuilding {
		return nil
	}
	next := r.cloneMeta()
	next.Rebuilding = true
	return r.commit(next)
}

// WriteLayer writes p at off into snapshot name's layer file, made when
// the replica does not have it yet, once p's SHA-256 is want; it returns
// the SHA-256 of what the file holds there after the write, read back.
// The replica must be being rebuilt.
func (r *Replica) WriteLayer(name string, p []byte, off int64, want [sha256.Size]byte) ([sha256.Size]byte, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.writeLayerLocked(name, p, off, want)
}

func (r *Replica) writeLayerLocked(name string, p []byte, off int64, want [sha256.Size]byte) (got [sha256.Size]byte, err error) {
	if r.chain == nil {
		return got, ErrClosed
	}
	if !r.meta.Rebuilding {
		return got, ErrNotRebuilding
	}
	if err := CheckSnapshotName(name); err != nil {
		return got, err
	}
	if off < 0 || off+int64(len(p)) > r.meta.Size {
		return got, fmt.Errorf("range %d+%d is outside the volume of %d bytes", off, len(p), r.meta.Size)
	}
	if sha256.Sum256(p) != want {
		return got, fmt.Errorf("layer of snapshot %q at %d: the data's SHA-256 is not the one sent with it", name, off)
	}
	f, err := os.OpenFile(filepath.Join(r.dir, snapshotFile(name)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return got, err
	}
	defer f.Close()
	if _, err := f.WriteAt(p, off); err != nil {
		return got, err
	}
	back := make([]byte, len(p))
	if err := readLayer(f, back, off); err != nil {
		return got, err
	}
	return sha256.Sum256(back), nil
}

// InstallChain ends a rebuild: it writes the metadata of the snapshots
// c lists over the replica's, keeps the snapshots the replica took since
// the rebuild began (on top of c.Top), makes every layer file as long as
// its snapshot and durable, and clears the rebuild's mark, in one commit.
// Nothing in c is trusted: names, labels, parents and sizes are checked.
func (r *Replica) InstallChain(c ChainMeta) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.installChainLocked(c)
}

func (r *Replica) installChainLocked(c ChainMeta) error {
	if r.chain == nil {
		return ErrClosed
	}
	if !r.meta.Rebuilding {
		return ErrNotRebuilding
	}
	if c.Size != r.meta.Size {
		return fmt.Errorf("the chain is of a volume of %d bytes, the replica of %d", c.Size, r.meta.Size)
	}
	if len(c.Snapshots) > MaxSnapshots {
		return fmt.Errorf("a chain of %d snapshots, above the %d a replica keeps", len(c.Snapshots), MaxSnapshots)
	}
	next := r.cloneMeta()
	given := map[string]bool{}
	for _, s := range c.Snapshots {
		if err := CheckSnapshotName(s.Name); err != nil {
			return err
		}
		if err := CheckLabels(s.Labels); err != nil {
			return fmt.Errorf("snapshot %q: %w", s.Name, err)
		}
		if given[s.Name] {
			return fmt.Errorf("snapshot %q is listed twice", s.Name)
		}
		if s.VolumeSize < 0 || s.VolumeSize > r.meta.Size {
			return fmt.Errorf("snapshot %q of a volume of %d bytes, above the replica's %d", s.Name, s.VolumeSize, r.meta.Size)
		}
		given[s.Name] = true
		next.Snapshots[s.Name] = &layerMeta{ID: s.ID, Parent: s.Parent, Removed: s.Removed, UserCreated: s.UserCreated,
			Created: s.Created, Labels: s.Labels, Size: s.VolumeSize}
	}
	if !given[c.Top] {
		return fmt.Errorf("the chain's top, snapshot %q, is not in it", c.Top)
	}
	if len(next.Snapshots) > MaxSnapshots {
		return fmt.Errorf("the chain and the replica's own snapshots are %d, above the %d a replica keeps", len(next.Snapshots), MaxSnapshots)
	}
	for name, m := range next.Snapshots {
		if _, ok := next.Snapshots[m.Parent]; m.Parent != "" && !ok {
			return fmt.Errorf("snapshot %q's parent %q is in no chain", name, m.Parent)
		}
	}
	// Every snapshot must reach the bottom without a cycle, the head's
	// ancestry through c.Top.
	saved := r.meta
	r.meta = next
	viaTop := false
	for name := range next.Snapshots {
		if _, err := r.ancestry(name); err != nil {
			r.meta = saved
			return err
		}
	}
	names, _ := r.ancestry(next.HeadParent)
	for _, n := range names {
		viaTop = viaTop || n == c.Top
	}
	r.meta = saved
	if !viaTop {
		return fmt.Errorf("the replica's head is not on the chain's top, snapshot %q", c.Top)
	}
	if err := sameBackingRef(c.Backing, r.meta.Backing); err != nil {
		return fmt.Errorf("the chain's backing file is not the replica's: %w", err)
	}
	for name := range given {
		if err := sizeLayer(filepath.Join(r.dir, snapshotFile(name)), r.snapshotSizeIn(next, name)); err != nil {
			return fmt.Errorf("layer of snapshot %q: %w", name, err)
		}
	}
	next.Rebuilding = false
	if err := r.commit(next); err != nil {
		return err
	}
	return r.loadChain()
}

// snapshotSizeIn is snapshot name's volume size in meta.
func (r *Replica) snapshotSizeIn(meta volumeMeta, name string) int64 {
	if s := meta.Snapshots[name].Size; s > 0 {
		return s
	}
	return meta.Size
}

// sizeLayer makes the layer file at path, size bytes long and durable:
// a layer the rebuild wrote nothing into is made, empty.
func sizeLayer(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() > size {
		return fmt.Errorf("it holds %d bytes, more than its snapshot's %d", st.Size(), size)
	}
	if st.Size() != size {
		if err := f.Truncate(size); err != nil {
			return err
		}
	}
	return f.Sync()
}

// sameBackingRef says how two backing file references differ; nil when
// they do not.
func sameBackingRef(a, b *BackingFile) error {
	if a == nil || b == nil {
		if a == b {
			return nil
		}
		return errors.New("one has a backing file, the other none")
	}
	if *a != *b {
		return fmt.Errorf("%+v, not %+v", *a, *b)
	}
	return nil
}
