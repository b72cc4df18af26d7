package volumeengine

// The snapshots of the engine's replicas: taken on every healthy replica
// at once, listed, marked removed, reverted to, and purged in the
// background.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// CreateSnapshot takes a snapshot on every healthy replica at once, named
// name (a fresh UUID when empty), and returns its name.
func (e *Engine) CreateSnapshot(name string, labels map[string]string) (string, error) {
	e.called("CreateSnapshot")
	if name == "" {
		name = uuid.NewString()
	}
	if name == replica.HeadName {
		return "", fmt.Errorf("%w: %s is not a snapshot name", ErrInvalid, replica.HeadName)
	}
	if url := e.restoring(); url != "" {
		return "", fmt.Errorf("%w: volume %s is being restored from %s: a snapshot of it waits until the restore ends", ErrPrecondition, e.name, url)
	}
	if src := e.cloning(); src != "" {
		return "", fmt.Errorf("%w: volume %s is being cloned from %s: a snapshot of it waits until the clone ends", ErrPrecondition, e.name, src)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.Fenced(); err != nil {
		return "", err
	}
	members := e.healthy()
	if len(members) == 0 {
		return "", ErrNoHealthyReplica
	}
	if members[0].r.HasSnapshot(name) {
		return "", fmt.Errorf("%w: snapshot %s %w", ErrInvalid, name, ErrExists)
	}
	now, id := e.clock.Now(), uuid.NewString()
	e.purged.forget(name)
	done := 0
	for _, m := range members {
		if err := m.r.CreateSnapshotWithID(name, id, true, now, labels); err != nil {
			if errors.Is(err, replica.ErrFenced) {
				e.fence(m, err)
				return "", e.Fenced()
			}
			if done == 0 {
				return "", fmt.Errorf("%w: %v", ErrInvalid, err)
			}
			e.fail(m, err)
			continue
		}
		done++
	}
	if done == 0 {
		return "", ErrNoHealthyReplica
	}
	// A replica being rebuilt takes it too: its chain matches the
	// others' from the rebuild's snapshot up.
	e.onRebuilding(func(r Replica) error { return r.CreateSnapshotWithID(name, id, true, now, labels) })
	e.log.WithField("snapshot", name).Info("Created snapshot")
	e.notify()
	return name, nil
}

// Snapshots lists the snapshots and the head, as the first healthy
// replica has them.
func (e *Engine) Snapshots() ([]replica.Snapshot, error) {
	e.called("Snapshots")
	return e.snapshots()
}

func (e *Engine) snapshots() ([]replica.Snapshot, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	members := e.healthy()
	if len(members) == 0 {
		return nil, ErrNoHealthyReplica
	}
	return members[0].r.Snapshots()
}

// Snapshot returns one snapshot.
func (e *Engine) Snapshot(name string) (replica.Snapshot, error) {
	list, err := e.Snapshots()
	if err != nil {
		return replica.Snapshot{}, err
	}
	for _, s := range list {
		if s.Name == name {
			return s, nil
		}
	}
	return replica.Snapshot{}, fmt.Errorf("%w: snapshot %s", ErrNotFound, name)
}

// DeleteSnapshot marks a snapshot removed on every healthy replica; a
// purge frees its data.
func (e *Engine) DeleteSnapshot(name string) error {
	e.called("DeleteSnapshot")
	if name == replica.HeadName {
		return fmt.Errorf("%w: %s cannot be deleted", ErrInvalid, replica.HeadName)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.Fenced(); err != nil {
		return err
	}
	members := e.healthy()
	if len(members) == 0 {
		return ErrNoHealthyReplica
	}
	if err := refuseRemote("deleting snapshot "+name, members); err != nil {
		return err
	}
	if err := e.refuseWhileRebuilding("deleting snapshot " + name); err != nil {
		return err
	}
	if held := e.held(name); held != nil {
		e.logHeldDelete(name, held.Why)
		return held
	}
	for i, m := range members {
		if err := m.r.MarkRemoved(name); err != nil {
			if errors.Is(err, replica.ErrNotFound) && i == 0 {
				return fmt.Errorf("%w: snapshot %s", ErrNotFound, name)
			}
			e.fail(m, err)
			if e.Fenced() != nil {
				// A fenced engine changes no more replicas.
				break
			}
		}
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	e.log.WithField("snapshot", name).Info("Marked snapshot removed")
	e.notify()
	return nil
}

// RevertSnapshot makes the volume read what snapshot name held. It is
// refused while a frontend serves the volume.
func (e *Engine) RevertSnapshot(name string) error {
	e.called("RevertSnapshot")
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.frontend {
		return fmt.Errorf("%w: revert needs the volume detached or without a frontend", ErrPrecondition)
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	members := e.healthy()
	if len(members) == 0 {
		return ErrNoHealthyReplica
	}
	if err := refuseRemote("revert to snapshot "+name, members); err != nil {
		return err
	}
	if err := e.refuseWhileRebuilding("revert to snapshot " + name); err != nil {
		return err
	}
	for i, m := range members {
		if err := m.r.Revert(name); err != nil {
			if errors.Is(err, replica.ErrNotFound) && i == 0 {
				return fmt.Errorf("%w: snapshot %s", ErrNotFound, name)
			}
			e.fail(m, err)
			if e.Fenced() != nil {
				break
			}
		}
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	e.log.WithField("snapshot", name).Info("Reverted to snapshot")
	e.notify()
	return nil
}

// StartPurge purges removed snapshots on every healthy replica in the
// background, unless a purge already runs; PurgeStatus follows it.
func (e *Engine) StartPurge() {
	e.called("StartPurge")
	e.purgeMu.Lock()
	if e.purge.IsPurging || e.closed.Load() {
		e.purgeMu.Unlock()
		return
	}
	e.purge = PurgeStatus{IsPurging: true, State: "in_progress"}
	e.purging.Add(1)
	e.purgeMu.Unlock()
	e.notify()
	go func() {
		defer e.purging.Done()
		err := e.purgeAll()
		e.purgeMu.Lock()
		e.purge = PurgeStatus{Progress: 100, State: "complete"}
		if err != nil {
			e.purge = PurgeStatus{State: "error", Error: err.Error()}
		}
		e.purgeMu.Unlock()
		e.generation.Add(1)
		e.changed()
	}()
}

// purgeAll purges every healthy replica, with the volume's I/O held
// (e.mu) until all are done, as a purge of one replica holds its writes.
// The remote replicas purge at once, each on its own node, beside the
// replicas of this process, which purge one after the other; so I/O is
// held for the longest of them, not their sum. A replica whose purge
// fails is dropped, once every purge has ended. A panic in it is the
// purge's error, logged with the stack: the engine goes on serving.
func (e *Engine) purgeAll() (err error) {
	defer panics.Recover(e.log, &err)
	start := e.clock.Now()
	// A purge merges layers a rebuild reads: it waits for the rebuild.
	e.lockWithoutRebuild()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return errors.New("the engine stopped before the purge began")
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	members := e.healthy()
	if err := refuseRemote("purge", members); err != nil {
		return err
	}
	type outcome struct {
		purged []string
		err    error
	}
	outcomes := make([]outcome, len(members))
	done := 0
	purgeOne := func(i int) {
		p, err := members[i].r.Purge()
		outcomes[i] = outcome{p, err}
		e.purgeMu.Lock()
		done++
		e.purge.Progress = done * 100 / len(members)
		e.purgeMu.Unlock()
		e.generation.Add(1)
	}
	// A panic here waits for the purges begun, which hold the volume's
	// replicas, before the I/O goes on.
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, m := range members {
		if m.remote != "" {
			wg.Go(func() { defer panics.Recover(e.log, &outcomes[i].err); purgeOne(i) })
		}
	}
	for i, m := range members {
		if m.remote == "" {
			purgeOne(i)
		}
	}
	wg.Wait()
	var purged []string
	recorded := false
	for i, m := range members {
		if o := outcomes[i]; o.err != nil {
			e.fail(m, o.err)
		} else if !recorded {
			purged, recorded = o.purged, true
			e.purged.add(purged)
		}
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	e.log.WithFields(logrus.Fields{"purged": purged, "replicas": len(members), "took": time.Since(start).Round(time.Millisecond)}).Info("Purged removed snapshots")
	return nil
}

// PurgeStatus reports the last purge.
func (e *Engine) PurgeStatus() PurgeStatus {
	e.called("PurgeStatus")
	return e.purgeStatus()
}

func (e *Engine) purgeStatus() PurgeStatus {
	e.purgeMu.Lock()
	defer e.purgeMu.Unlock()
	return e.purge
}
