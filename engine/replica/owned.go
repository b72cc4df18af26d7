package replica

import "time"

// Owned is the replica as one engine instance, with its term, uses it:
// every request through it is refused with ErrFenced, changing nothing,
// once a newer engine took the replica (term.go). The check and the
// request are one step under the replica's lock, as WriteAtTerm's are, so
// no write, trim, snapshot, epoch or other change of an older engine
// lands after a newer one accepted its term. The replica protocol's
// server serves each connection through one (engine/replicaproto), and an
// engine that owns a replica of its own process by a term holds it so.
//
// Reads that return an error are checked too (a fenced engine serves
// nothing); those that return none (Size, Epoch, HasSnapshot,
// SnapshotRemoved, SnapshotVolumeSize, Backing, ViewedSnapshots) read
// metadata only and are not.
type Owned struct {
	r      *Replica
	term   uint64
	holder string
}

// AtTerm returns the replica as holder, with term, uses it. It records
// nothing: AcceptTerm makes holder the owner first.
func (r *Replica) AtTerm(term uint64, holder string) *Owned {
	return &Owned{r: r, term: term, holder: holder}
}

// Term is the term and the engine instance the requests are made as.
func (o *Owned) Term() (uint64, string) { return o.term, o.holder }

// change runs f under the replica's lock once the owner is checked.
func (o *Owned) change(f func() error) error {
	o.r.mu.Lock()
	defer o.r.mu.Unlock()
	if err := o.r.checkTermLocked(o.term, o.holder); err != nil {
		return err
	}
	return f()
}

// read runs f under the replica's shared lock once the owner is checked.
func (o *Owned) read(f func() error) error {
	o.r.mu.RLock()
	defer o.r.mu.RUnlock()
	if err := o.r.checkTermLocked(o.term, o.holder); err != nil {
		return err
	}
	return f()
}

// ReadAt is Replica.ReadAt for the owner.
func (o *Owned) ReadAt(p []byte, off int64) (int, error) {
	err := o.read(func() error {
		if err := o.r.checkRange(len(p), off); err != nil {
			return err
		}
		return o.r.readLocked(p, off)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt is Replica.WriteAtTerm with the owner's term.
func (o *Owned) WriteAt(p []byte, off int64) (int, error) {
	return o.r.WriteAtTerm(p, off, o.term, o.holder)
}

// TrimKeeping is Replica.TrimKeeping for the owner.
func (o *Owned) TrimKeeping(off, length int64, keep []string) error {
	kept := keptSet(keep)
	return o.change(func() error { return o.r.trimLocked(off, length, kept) })
}

// Sync is Replica.Sync for the owner.
func (o *Owned) Sync() error { return o.read(o.r.syncLocked) }

// SetEpoch is Replica.SetEpoch for the owner: a fenced engine raises no
// replica's epoch.
func (o *Owned) SetEpoch(epoch uint64) error {
	return o.change(func() error { return o.r.setEpochLocked(epoch) })
}

// CreateSnapshotWithID is Replica.CreateSnapshotWithID for the owner.
func (o *Owned) CreateSnapshotWithID(name, id string, userCreated bool, created time.Time, labels map[string]string) error {
	return o.change(func() error {
		return o.r.createSnapshotLocked(name, id, userCreated, created, labels, noStep)
	})
}

// MarkRemoved is Replica.MarkRemoved for the owner.
func (o *Owned) MarkRemoved(name string) error {
	return o.change(func() error { return o.r.markRemovedLocked(name) })
}

// Revert is Replica.Revert for the owner.
func (o *Owned) Revert(name string) error {
	return o.change(func() error { return o.r.revertLocked(name) })
}

// Purge is Replica.Purge for the owner.
func (o *Owned) Purge() (purged []string, err error) {
	err = o.change(func() error {
		purged, err = o.r.purgeLocked(noStep)
		return err
	})
	return purged, err
}

// Grow is Replica.Grow for the owner.
func (o *Owned) Grow(size int64) error {
	return o.change(func() error { return o.r.growLocked(size, noStep) })
}

// Snapshots is Replica.Snapshots for the owner.
func (o *Owned) Snapshots() ([]Snapshot, error) {
	if err := o.r.CheckTerm(o.term, o.holder); err != nil {
		return nil, err
	}
	return o.r.Snapshots()
}

// OpenSnapshotRange is Replica.OpenSnapshotRange for the owner.
func (o *Owned) OpenSnapshotRange(name string, off, end int64) (*SnapshotView, error) {
	if err := o.r.CheckTerm(o.term, o.holder); err != nil {
		return nil, err
	}
	return o.r.OpenSnapshotRange(name, off, end)
}

// ChangedBlocksByID is Replica.ChangedBlocksByID for the owner.
func (o *Owned) ChangedBlocksByID(sinceID, id string) ([]bool, bool, error) {
	if err := o.r.CheckTerm(o.term, o.holder); err != nil {
		return nil, false, err
	}
	return o.r.ChangedBlocksByID(sinceID, id)
}

// Written is Replica.Written for the owner.
func (o *Owned) Written() ([]bool, error) {
	if err := o.r.CheckTerm(o.term, o.holder); err != nil {
		return nil, err
	}
	return o.r.Written()
}

// OpenLayers is Replica.OpenLayers for the owner.
func (o *Owned) OpenLayers(top string) (*Layers, error) {
	if err := o.r.CheckTerm(o.term, o.holder); err != nil {
		return nil, err
	}
	return o.r.OpenLayers(top)
}

// BeginRebuild is Replica.BeginRebuild for the owner.
func (o *Owned) BeginRebuild() error { return o.change(o.r.beginRebuildLocked) }

// WriteLayer is Replica.WriteLayer for the owner.
func (o *Owned) WriteLayer(name string, p []byte, off int64, want [32]byte) (got [32]byte, err error) {
	err = o.read(func() error {
		got, err = o.r.writeLayerLocked(name, p, off, want)
		return err
	})
	return got, err
}

// InstallChain is Replica.InstallChain for the owner.
func (o *Owned) InstallChain(c ChainMeta) error {
	return o.change(func() error { return o.r.installChainLocked(c) })
}

// Rebuilding is Replica.Rebuilding.
func (o *Owned) Rebuilding() bool { return o.r.Rebuilding() }

// Size is the replica's size.
func (o *Owned) Size() int64 { return o.r.Size() }

// Epoch is the replica's epoch.
func (o *Owned) Epoch() uint64 { return o.r.Epoch() }

// HasSnapshot is Replica.HasSnapshot.
func (o *Owned) HasSnapshot(name string) bool { return o.r.HasSnapshot(name) }

// SnapshotRemoved is Replica.SnapshotRemoved.
func (o *Owned) SnapshotRemoved(name string) (exists, removed bool) { return o.r.SnapshotRemoved(name) }

// SnapshotVolumeSize is Replica.SnapshotVolumeSize.
func (o *Owned) SnapshotVolumeSize(name string) (int64, bool) { return o.r.SnapshotVolumeSize(name) }

// Backing is Replica.Backing.
func (o *Owned) Backing() *BackingFile { return o.r.Backing() }

// ViewedSnapshots is Replica.ViewedSnapshots.
func (o *Owned) ViewedSnapshots() []string { return o.r.ViewedSnapshots() }

// Close closes the replica: the owner's requests end with it.
func (o *Owned) Close() error { return o.r.Close() }
