package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/google/uuid"
)

// MaxSnapshots bounds the snapshots of a replica, as Longhorn does.
const MaxSnapshots = 250

var snapshotNamePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// MaxSnapshotName is the longest name a snapshot may have.
const MaxSnapshotName = 63

// CheckSnapshotName says whether name may name a snapshot: 1 to
// MaxSnapshotName letters, digits, '-', '_' or '.', starting with a letter
// or digit, and not HeadName. No snapshot of a replica has a name it
// refuses.
func CheckSnapshotName(name string) error {
	if !snapshotNamePattern.MatchString(name) || name == HeadName {
		return fmt.Errorf("snapshot name %.80q: must be 1 to 63 letters, digits, '-', '_' or '.', starting with a letter or digit, and not %s", name, HeadName)
	}
	return nil
}

// Snapshot is one snapshot, or the head (Name HeadName), as a list shows it.
type Snapshot struct {
	Name string
	// ID identifies this very snapshot: a later snapshot given the same
	// name has another ID. Empty for one taken before IDs were recorded.
	ID          string
	Parent      string
	Children    []string
	Removed     bool
	UserCreated bool
	Created     string
	// Size is the bytes of data the layer itself holds.
	Size   int64
	Labels map[string]string
}

// step is called after each file operation of a snapshot change; tests
// return an error from it to cut the operation short, as a crash would.
type step func(name string) error

func noStep(string) error { return nil }

// crashError marks an error a test's step returned.
type crashError struct{ step string }

func (c crashError) Error() string { return "crash injected after " + c.step }

func isCrash(err error) bool {
	var c crashError
	return errors.As(err, &c)
}

// CreateSnapshot freezes the head as snapshot name and opens a new, empty
// head on top of it. Only the head's data is synced; no data is copied.
// The snapshot gets a fresh ID.
func (r *Replica) CreateSnapshot(name string, userCreated bool, created time.Time, labels map[string]string) error {
	return r.createSnapshot(name, uuid.NewString(), userCreated, created, labels, noStep)
}

// CreateSnapshotWithID is CreateSnapshot with the ID given: an engine
// gives every replica's copy of a snapshot the same one.
func (r *Replica) CreateSnapshotWithID(name, id string, userCreated bool, created time.Time, labels map[string]string) error {
	if id == "" {
		return errors.New("a snapshot ID must not be empty")
	}
	return r.createSnapshot(name, id, userCreated, created, labels, noStep)
}

func (r *Replica) createSnapshot(name, id string, userCreated bool, created time.Time, labels map[string]string, after step) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.createSnapshotLocked(name, id, userCreated, created, labels, after)
}

func (r *Replica) createSnapshotLocked(name, id string, userCreated bool, created time.Time, labels map[string]string, after step) (err error) {
	if r.chain == nil {
		return ErrClosed
	}
	committed := false
	defer func() {
		// A failure before the commit leaves the old tree in force: drop
		// the files it added. (An injected crash skips this, as a real one
		// would; Open cleans up then.)
		if err != nil && !committed && !isCrash(err) {
			os.Remove(filepath.Join(r.dir, snapshotFile(name)))
			os.Remove(filepath.Join(r.dir, headFile(r.meta.HeadIndex+1)))
		}
	}()
	if err := CheckSnapshotName(name); err != nil {
		return err
	}
	if err := CheckLabels(labels); err != nil {
		return fmt.Errorf("snapshot %q: %w", name, err)
	}
	if _, exists := r.meta.Snapshots[name]; exists {
		return fmt.Errorf("snapshot %q already exists", name)
	}
	if len(r.meta.Snapshots) >= MaxSnapshots {
		return fmt.Errorf("the replica has %d snapshots, the most it may keep; delete and purge some first", len(r.meta.Snapshots))
	}
	head := r.chain[len(r.chain)-1]
	if err := head.Sync(); err != nil {
		return err
	}
	oldHead := headFile(r.meta.HeadIndex)
	// The frozen head keeps its inode under the snapshot's name: a link,
	// so nothing is copied and the old name stays valid until the commit.
	if err := os.Link(filepath.Join(r.dir, oldHead), filepath.Join(r.dir, snapshotFile(name))); err != nil {
		return err
	}
	if err := after("link"); err != nil {
		return err
	}
	if err := createSparse(filepath.Join(r.dir, headFile(r.meta.HeadIndex+1)), r.meta.Size); err != nil {
		return err
	}
	if err := after("new head"); err != nil {
		return err
	}
	next := r.cloneMeta()
	next.Snapshots[name] = &layerMeta{ID: id, Parent: r.meta.HeadParent, UserCreated: userCreated, Created: created.UTC().Format(time.RFC3339Nano), Labels: labels, Size: r.meta.Size}
	next.HeadParent = name
	next.HeadIndex++
	if err := r.commit(next); err != nil {
		return err
	}
	committed = true
	if err := after("commit"); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(r.dir, oldHead)); err != nil {
		return err
	}
	// The chain gains a layer: the old head's file, now read-only, stays
	// open at the same index, so the location map needs no change; an
	// old head that holds nothing is closed, as nothing reads from it.
	f, err := os.OpenFile(filepath.Join(r.dir, headFile(r.meta.HeadIndex)), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if !r.headWritten {
		r.chain[len(r.chain)-1].Close()
		r.chain[len(r.chain)-1] = nil
	}
	r.chainNames[len(r.chainNames)-1] = name
	r.chain = append(r.chain, f)
	r.chainNames = append(r.chainNames, "")
	r.headWritten = false
	return nil
}

func (r *Replica) cloneMeta() volumeMeta {
	next := r.meta
	next.Snapshots = make(map[string]*layerMeta, len(r.meta.Snapshots)+1)
	for k, v := range r.meta.Snapshots {
		c := *v
		next.Snapshots[k] = &c
	}
	return next
}

// commit writes the metadata atomically and adopts it.
func (r *Replica) commit(next volumeMeta) error {
	if err := writeJSON(filepath.Join(r.dir, volumeMetaFile), next); err != nil {
		return err
	}
	r.meta = next
	return nil
}

// Snapshots lists the snapshots and the head, sorted by creation time
// (the head last).
func (r *Replica) Snapshots() ([]Snapshot, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.chain == nil {
		return nil, ErrClosed
	}
	children := map[string][]string{}
	for name, m := range r.meta.Snapshots {
		children[m.Parent] = append(children[m.Parent], name)
	}
	children[r.meta.HeadParent] = append(children[r.meta.HeadParent], HeadName)
	var out []Snapshot
	for name, m := range r.meta.Snapshots {
		size, err := r.layerSize(snapshotFile(name))
		if err != nil {
			return nil, err
		}
		kids := children[name]
		sort.Strings(kids)
		out = append(out, Snapshot{Name: name, ID: m.ID, Parent: m.Parent, Children: kids, Removed: m.Removed,
			UserCreated: m.UserCreated, Created: m.Created, Size: size, Labels: m.Labels})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Created != out[j].Created {
			return out[i].Created < out[j].Created
		}
		return out[i].Name < out[j].Name
	})
	size, err := r.layerSize(headFile(r.meta.HeadIndex))
	if err != nil {
		return nil, err
	}
	return append(out, Snapshot{Name: HeadName, Parent: r.meta.HeadParent, Size: size}), nil
}

// HasSnapshot tells whether the replica has a snapshot of that name,
// removed or not, without reading any layer.
func (r *Replica) HasSnapshot(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.meta.Snapshots[name]
	return ok
}

// layerSize is the bytes of data a layer file holds.
func (r *Replica) layerSize(file string) (int64, error) {
	f, err := os.Open(filepath.Join(r.dir, file))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var size int64
	err = dataExtents(f, r.meta.Size, func(start, end int64) { size += end - start })
	return size, err
}

// MarkRemoved deletes a snapshot as Longhorn does: it is marked removed,
// and its data goes when a purge merges it into its child.
func (r *Replica) MarkRemoved(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.markRemovedLocked(name)
}

func (r *Replica) markRemovedLocked(name string) error {
	if r.chain == nil {
		return ErrClosed
	}
	m, ok := r.meta.Snapshots[name]
	if !ok {
		return fmt.Errorf("snapshot %q: %w", name, ErrNotFound)
	}
	if m.Removed {
		return nil
	}
	next := r.cloneMeta()
	next.Snapshots[name].Removed = true
	return r.commit(next)
}

// SnapshotRemoved tells whether snapshot name exists and whether it is
// marked removed, without reading any layer.
func (r *Replica) SnapshotRemoved(name string) (exists, removed bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	m, ok := r.meta.Snapshots[name]
	if !ok {
		return false, false
	}
	return true, m.Removed
}
