package volumeengine

// A replica rebuilt into the running engine (docs/design-data-plane.md,
// "Failure and rebuild"), Longhorn's sequence: the new replica, empty,
// joins as WO (it takes every write, serves no read); a system snapshot is
// taken on every replica, the WO one included, so everything written
// before the join is in immutable layers of the healthy replicas and
// everything after is on all of them; the layers under it are copied from
// a healthy replica (rebuild_copy.go), the chain's metadata last; the two
// chains are compared and the replica is made RW with the volume's epoch,
// I/O held for that instant. A rebuild that fails leaves the replica ERR,
// with the reason, never RW.

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// RebuildStatus is a replica's rebuild as Longhorn's Engine reports it
// (status.rebuildStatus): running, how far, its state ("in_progress",
// "complete", "error"), why it failed, and the replica it copies from.
type RebuildStatus struct {
	IsRebuilding bool
	Progress     int
	State        string
	Error        string
	// FromReplica names the source; FromReplicaAddress is its server's
	// address when it is remote, "" for a replica of the engine's process.
	FromReplica        string
	FromReplicaAddress string
}

// RebuildTarget is what a replica being rebuilt takes besides the I/O
// path: *replica.Replica, *replica.Owned and a remote replica (of a
// server of replica protocol version 3).
type RebuildTarget interface {
	BeginRebuild() error
	WriteLayer(name string, p []byte, off int64, sum [32]byte) ([32]byte, error)
	InstallChain(c replica.ChainMeta) error
}

// layerSource is a healthy replica's layers, held while a rebuild reads
// them: *replica.Layers, or a remote replica's over the protocol.
type layerSource interface {
	Chain() replica.ChainMeta
	Extents(name string, from int64, max int) ([]replica.Extent, int64, error)
	ReadLayer(name string, p []byte, off int64) ([32]byte, error)
	Close() error
}

// localLayers is a replica of the engine's own process read for a rebuild.
type localLayers interface {
	OpenLayers(top string) (*replica.Layers, error)
}

// rebuildState is the engine's rebuilds: at most one runs at a time.
type rebuildState struct {
	mu sync.Mutex
	// running is the replica being rebuilt, "" when none is; done is
	// closed when it ends.
	running string
	done    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	status  map[string]RebuildStatus
	// woMu orders the widened writes to WO replicas (writeRebuilding).
	woMu sync.Mutex
}

// ErrRebuilding marks a change refused while a replica is rebuilt: a
// snapshot's deletion, a revert, a growth (a purge waits instead). It is
// an ErrPrecondition.
var ErrRebuilding = errors.New("a replica is being rebuilt")

// RebuildStatus reports each replica's last rebuild, by name. Not a call
// of the control API.
func (e *Engine) RebuildStatus() map[string]RebuildStatus {
	e.rebuild.mu.Lock()
	defer e.rebuild.mu.Unlock()
	out := make(map[string]RebuildStatus, len(e.rebuild.status))
	for n, s := range e.rebuild.status {
		out[n] = s
	}
	return out
}

func (e *Engine) setRebuildStatus(name string, f func(*RebuildStatus)) {
	e.rebuild.mu.Lock()
	if e.rebuild.status == nil {
		e.rebuild.status = map[string]RebuildStatus{}
	}
	s := e.rebuild.status[name]
	f(&s)
	e.rebuild.status[name] = s
	e.rebuild.mu.Unlock()
	e.generation.Add(1)
}

// refuseWhileRebuilding refuses op while a rebuild reads the layers:
// the caller holds e.mu, under which a rebuild starts.
func (e *Engine) refuseWhileRebuilding(op string) error {
	e.rebuild.mu.Lock()
	defer e.rebuild.mu.Unlock()
	if r := e.rebuild.running; r != "" {
		return fmt.Errorf("%w: volume %s: %s waits: replica %s is being rebuilt; try again once that is done: %w", ErrPrecondition, e.name, op, r, ErrRebuilding)
	}
	return nil
}

// lockWithoutRebuild takes e.mu exclusively once no rebuild runs.
func (e *Engine) lockWithoutRebuild() {
	for {
		e.mu.Lock()
		e.rebuild.mu.Lock()
		done := e.rebuild.done
		running := e.rebuild.running != ""
		e.rebuild.mu.Unlock()
		if !running {
			return
		}
		e.mu.Unlock()
		<-done
	}
}

// stopRebuild ends a rebuild that runs, for Close, and waits for it.
func (e *Engine) stopRebuild() {
	e.rebuild.mu.Lock()
	if e.rebuild.cancel != nil {
		e.rebuild.cancel()
	}
	e.rebuild.mu.Unlock()
	e.rebuild.wg.Wait()
}

// OpenRemoteReplica opens replica name, which the server at address
// serves, with the engine's term, TLS and timeouts: a replica to rebuild
// (StartRebuild). The caller closes it unless StartRebuild took it.
func (e *Engine) OpenRemoteReplica(name, address string) (Replica, error) {
	o := e.opts
	if o.owner == nil {
		return nil, fmt.Errorf("%w: volume %s: a remote replica is opened with a term, and the engine has none", ErrPrecondition, e.name)
	}
	o.remotes = map[string]string{name: address}
	opened, err := openRemotes(e.name, o)
	if err != nil {
		return nil, err
	}
	return opened[name], nil
}

// StartRebuild rebuilds replica name, new and empty, from healthy replica
// from ("" for the first healthy one, of the engine's own process before
// a remote one) while the volume is in use, and returns once r has joined
// as WO and the rebuild's snapshot is taken; the copy runs in the
// background and RebuildStatus follows it. r is the engine's from the call
// on, whatever its outcome (Close closes it): a replica of this process
// (*replica.Replica, whose term the engine records when it has one) or a
// remote one (OpenRemoteReplica). Refused (ErrPrecondition) while another
// rebuild, a restore or a clone runs, or when r or the source is remote
// on a server of replica protocol version 2 (ErrNotCarried, naming it).
func (e *Engine) StartRebuild(name string, r Replica, from string) (err error) {
	e.called("StartRebuild")
	log := e.log.WithFields(logrus.Fields{"replica": name, "from": from})
	joined := false
	defer func() {
		if err != nil && !joined {
			r.Close()
			log.WithError(err).Warn("Rebuild refused")
		}
	}()
	if url := e.restoring(); url != "" {
		return fmt.Errorf("%w: volume %s is being restored from %s: a replica is rebuilt once the restore ends", ErrPrecondition, e.name, url)
	}
	if src := e.cloning(); src != "" {
		return fmt.Errorf("%w: volume %s is being cloned from %s: a replica is rebuilt once the clone ends", ErrPrecondition, e.name, src)
	}
	if rr, ok := r.(*replica.Replica); ok && e.opts.owner != nil {
		if err := rr.AcceptTerm(e.opts.owner.term, e.opts.owner.instance); err != nil {
			return fmt.Errorf("volume %s: replica %s: take term %d: %w", e.name, name, e.opts.owner.term, err)
		}
		r = rr.AtTerm(e.opts.owner.term, e.opts.owner.instance)
	}
	target, ok := r.(RebuildTarget)
	if !ok {
		return fmt.Errorf("%w: volume %s: replica %s cannot be rebuilt", ErrInvalid, e.name, name)
	}
	remote := ""
	if rr, ok := r.(*remoteReplica); ok {
		remote = rr.addr
		if !rr.c.CarriesRebuild() {
			return fmt.Errorf("%w: rebuild of remote replica %s at %s: its instance manager is older than this engine's, of replica protocol version %d (3 needed): %w",
				ErrPrecondition, name, rr.addr, rr.c.Version(), ErrNotCarried)
		}
	}
	if r.Size() != e.Size() {
		return fmt.Errorf("%w: volume %s: replica %s is of %d bytes, the volume of %d", ErrInvalid, e.name, name, r.Size(), e.Size())
	}
	// The source is checked before the target is touched (join checks
	// it again, with I/O held).
	e.mu.RLock()
	_, err = e.pickSource(from)
	e.mu.RUnlock()
	if err != nil {
		return err
	}
	// Marked durably before it takes a write: a replica whose rebuild
	// stops midway is never taken for a complete one.
	if err := target.BeginRebuild(); err != nil {
		return fmt.Errorf("volume %s: replica %s: begin the rebuild: %w", e.name, name, err)
	}

	e.mu.Lock()
	src, snap, err := e.join(name, r, remote, from)
	if err != nil {
		// Once it joined, the replica is the engine's, ERR with the reason.
		for _, m := range e.replicas {
			joined = joined || m.r == r
		}
		e.mu.Unlock()
		return err
	}
	joined = true
	e.mu.Unlock()
	e.notify()
	log = log.WithFields(logrus.Fields{"from": src.name, "snapshot": snap})
	log.Info("Rebuilding replica: it joined as WO, the rebuild's snapshot is taken")
	ctx, cancel := context.WithCancel(context.Background())
	e.rebuild.mu.Lock()
	e.rebuild.cancel = cancel
	e.rebuild.mu.Unlock()
	e.rebuild.wg.Go(func() {
		defer cancel()
		e.runRebuild(ctx, log, e.memberNamed(name), src, snap)
	})
	return nil
}

// join adds r as WO and takes the rebuild's snapshot on every replica, r
// included, with I/O held (the caller holds e.mu), and picks the source.
func (e *Engine) join(name string, r Replica, remote, from string) (*member, string, error) {
	if err := e.Fenced(); err != nil {
		return nil, "", err
	}
	e.rebuild.mu.Lock()
	busy := e.rebuild.running
	e.rebuild.mu.Unlock()
	if busy != "" {
		return nil, "", fmt.Errorf("%w: volume %s: replica %s is being rebuilt; one rebuild at a time: %w", ErrPrecondition, e.name, busy, ErrRebuilding)
	}
	src, err := e.pickSource(from)
	if err != nil {
		return nil, "", err
	}
	at := -1
	for i, m := range e.replicas {
		if m.name == name {
			if !m.failed.Load() {
				return nil, "", fmt.Errorf("%w: volume %s: replica %s is in the engine already, %s", ErrPrecondition, e.name, name, m.mode())
			}
			at = i
		}
	}
	m := &member{name: name, r: r, remote: remote}
	m.wo.Store(true)
	if at >= 0 {
		// An ERR replica of that name is replaced: its files are closed.
		e.replicas[at].r.Close()
		e.replicas[at] = m
	} else {
		e.replicas = append(e.replicas, m)
	}
	if remote != "" {
		e.atOnce = true
	}
	e.rebuild.mu.Lock()
	e.rebuild.running, e.rebuild.done = name, make(chan struct{})
	e.rebuild.mu.Unlock()
	e.setRebuildStatus(name, func(s *RebuildStatus) {
		*s = RebuildStatus{IsRebuilding: true, State: "in_progress", FromReplica: src.name, FromReplicaAddress: src.remote}
	})
	snap := "rebuild-" + uuid.NewString()[:8]
	now, id := e.clock.Now(), uuid.NewString()
	e.purged.forget(snap)
	done := 0
	for _, o := range e.healthy() {
		if err := o.r.CreateSnapshotWithID(snap, id, false, now, nil); err != nil {
			if errors.Is(err, replica.ErrFenced) {
				e.fence(o, err)
				e.endRebuild(m, e.Fenced())
				return nil, "", e.Fenced()
			}
			e.fail(o, err)
			continue
		}
		done++
	}
	if done == 0 || !src.rw() {
		err := fmt.Errorf("volume %s: the rebuild's snapshot %s: the source, replica %s, failed to take it", e.name, snap, src.name)
		e.endRebuild(m, err)
		return nil, "", err
	}
	if err := r.CreateSnapshotWithID(snap, id, false, now, nil); err != nil {
		err = fmt.Errorf("the rebuild's snapshot %s: %w", snap, err)
		e.endRebuild(m, err)
		return nil, "", err
	}
	return src, snap, nil
}

// pickSource is healthy replica from, or the first healthy one whose
// layers a rebuild can read (the engine's own process's first).
func (e *Engine) pickSource(from string) (*member, error) {
	for _, m := range e.healthy() {
		if from != "" && m.name != from {
			continue
		}
		switch r := m.r.(type) {
		case localLayers:
			return m, nil
		case *remoteReplica:
			if r.c.CarriesRebuild() {
				return m, nil
			}
			if from != "" {
				return nil, fmt.Errorf("%w: rebuild from remote replica %s at %s: its instance manager is older than this engine's, of replica protocol version %d (3 needed): %w",
					ErrPrecondition, m.name, m.remote, r.c.Version(), ErrNotCarried)
			}
		}
	}
	if from != "" {
		return nil, fmt.Errorf("%w: volume %s: replica %s, to rebuild from, is not a healthy replica of the engine", ErrPrecondition, e.name, from)
	}
	return nil, fmt.Errorf("volume %s: rebuild: no healthy replica to rebuild from: %w", e.name, ErrNoHealthyReplica)
}

func (e *Engine) memberNamed(name string) *member {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, m := range e.replicas {
		if m.name == name {
			return m
		}
	}
	return nil
}

// dropRebuilding makes m, being rebuilt, ERR for err: the first reason
// is kept. The rebuild itself ends when its copy sees it (endRebuild).
func (e *Engine) dropRebuilding(m *member, err error) {
	e.failMu.Lock()
	defer e.failMu.Unlock()
	if m.failed.Load() {
		return
	}
	m.err = "rebuild: " + err.Error()
	m.failed.Store(true)
	m.wo.Store(false)
}

// endRebuild ends the rebuild of m: RW when err is nil (the caller made
// it so), ERR with the first reason it failed for otherwise.
func (e *Engine) endRebuild(m *member, err error) {
	if err != nil {
		e.dropRebuilding(m, err)
		e.failMu.Lock()
		why := m.err
		e.failMu.Unlock()
		e.setRebuildStatus(m.name, func(s *RebuildStatus) {
			s.IsRebuilding, s.State, s.Error = false, "error", why
		})
	} else {
		e.setRebuildStatus(m.name, func(s *RebuildStatus) {
			s.IsRebuilding, s.State, s.Progress, s.Error = false, "complete", 100, ""
		})
	}
	e.rebuild.mu.Lock()
	if e.rebuild.running == m.name {
		close(e.rebuild.done)
		e.rebuild.running = ""
	}
	e.rebuild.mu.Unlock()
	e.notify()
}

// onRebuilding does op on every WO replica after the RW ones did it; one
// that fails ends its rebuild (ERR). The caller holds e.mu.
func (e *Engine) onRebuilding(op func(Replica) error) {
	for _, m := range e.replicas {
		if !m.rebuilding() {
			continue
		}
		if err := op(m.r); err != nil {
			if errors.Is(err, replica.ErrFenced) {
				e.fence(m, err)
			}
			e.log.WithError(err).WithField("replica", m.name).Error("Rebuilding replica failed an I/O; its rebuild ends")
			e.dropRebuilding(m, err)
			e.notify()
		}
	}
}

// writeRebuilding writes p at off to the WO replicas, after the RW ones
// took it. A write that covers part of a block is widened to whole blocks
// read from a RW replica: a replica fills the rest of a block from its
// chain, and a WO replica's chain is not complete yet. The widened writes
// take turns (woMu), each reading after its own RW write, so the last to
// write a block reads every RW write to it acknowledged before. (Writes
// that overlap and run at once have no order on any disk, nor across
// replicas here.)
func (e *Engine) writeRebuilding(p []byte, off int64) {
	if !e.hasRebuilding() {
		return
	}
	const bs = replica.BlockSize
	start, end := off/bs*bs, (off+int64(len(p))+bs-1)/bs*bs
	if start == off && end == off+int64(len(p)) {
		e.onRebuilding(func(r Replica) error { _, err := r.WriteAt(p, off); return err })
		return
	}
	e.rebuild.woMu.Lock()
	defer e.rebuild.woMu.Unlock()
	buf := make([]byte, end-start)
	for _, m := range e.healthy() {
		if _, err := m.r.ReadAt(buf, start); err == nil {
			e.onRebuilding(func(r Replica) error { _, err := r.WriteAt(buf, start); return err })
			return
		}
	}
	e.onRebuilding(func(Replica) error {
		return errors.New("a partial block's write: no RW replica read the rest of the block")
	})
}

func (e *Engine) hasRebuilding() bool {
	for _, m := range e.replicas {
		if m.rebuilding() {
			return true
		}
	}
	return false
}
