package volumeengine

import (
	"fmt"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Replica is what the engine needs of each of its replicas: a replica of
// its own process (*replica.Replica, or *replica.Owned when the engine
// owns it by a term) or one that another process serves over the replica
// protocol (remote.go). Every method may fail for the replica alone: the
// engine then drops it, as it drops one whose I/O fails.
type Replica interface {
	// The I/O path.
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	TrimKeeping(off, length int64, keep []string) error
	Sync() error

	// Size is the replica's size, Epoch how current its data is
	// (replica.Replica.Epoch); SetEpoch records a new one durably, the
	// data synced first.
	Size() int64
	Epoch() uint64
	SetEpoch(epoch uint64) error

	// Snapshots: take one, list the chain.
	CreateSnapshotWithID(name, id string, userCreated bool, created time.Time, labels map[string]string) error
	Snapshots() ([]replica.Snapshot, error)
	HasSnapshot(name string) bool

	// Control operations that change the chain or the size.
	MarkRemoved(name string) error
	Revert(name string) error
	Purge() ([]string, error)
	Grow(size int64) error

	Close() error
}

// LayerReader is what the engine reads a replica's layers through, in
// place: snapshot views for exports, clones and backups, a backup's
// changed blocks, the blocks a clone must zero, the views a trim keeps.
// Only a replica of the engine's own process is one; the replica
// protocol carries no layer yet (READ_LAYER is the design's, not built),
// so those reads are made on a local replica, and refused, naming the
// remote replicas, when the engine has none healthy.
type LayerReader interface {
	SnapshotRemoved(name string) (exists, removed bool)
	SnapshotVolumeSize(name string) (int64, bool)
	OpenSnapshotRange(name string, off, end int64) (*replica.SnapshotView, error)
	Backing() *replica.BackingFile
	ChangedBlocksByID(sinceID, id string) (changed []bool, full bool, err error)
	Written() ([]bool, error)
	ViewedSnapshots() []string
}

var (
	_ Replica     = (*replica.Replica)(nil)
	_ LayerReader = (*replica.Replica)(nil)
	_ Replica     = (*replica.Owned)(nil)
	_ LayerReader = (*replica.Owned)(nil)
)

// layersOf is the first of members (healthy replicas) whose layers the
// engine can read in place, and its member, for what (an operation, said
// in the error when there is none).
func (e *Engine) layersOf(what string, members []*member) (LayerReader, *member, error) {
	for _, m := range members {
		if l, ok := m.r.(LayerReader); ok {
			return l, m, nil
		}
	}
	if len(members) > 0 {
		// Only remote ones, which read no layer here.
		return nil, nil, fmt.Errorf("volume %s: %w", e.name, notCarried(what, members[0]))
	}
	return nil, nil, fmt.Errorf("volume %s: %s: %w", e.name, what, ErrNoHealthyReplica)
}
