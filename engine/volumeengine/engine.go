// Package volumeengine is a volume's engine: it fans writes out to the
// volume's replicas, reads from a healthy one, and takes, lists, deletes,
// purges and reverts snapshots on all of them at once.
package volumeengine

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// Mode is a replica's mode as the engine sees it.
type Mode string

const (
	// ModeRW replicas take reads and writes.
	ModeRW Mode = "RW"
	// ModeERR replicas failed an I/O and are no longer used.
	ModeERR Mode = "ERR"
	// ModeWO replicas are being rebuilt (rebuild.go): they take every
	// write, serve no read, and count for no acknowledgement.
	ModeWO Mode = "WO"
)

var (
	// ErrNotFound: the snapshot does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request breaks a rule (a name, volume-head).
	ErrInvalid = errors.New("invalid")
	// ErrPrecondition: the volume's state forbids the request.
	ErrPrecondition = errors.New("not allowed now")
	// ErrNoHealthyReplica: every replica has failed.
	ErrNoHealthyReplica = errors.New("no healthy replica")
	// ErrExists: a snapshot of that name exists (an ErrInvalid too).
	ErrExists = errors.New("already exists")
)

type member struct {
	name string
	r    Replica
	// remote is the address of the replica's server when another process
	// serves it (Remote), "" for a replica of this process.
	remote string
	// failed is set once the replica is ERR; it never goes back to RW in
	// this engine. err says why (under Engine.failMu).
	failed atomic.Bool
	err    string
	// behind: ERR from the start, its data behind the others'.
	behind bool
	// wo: the replica is being rebuilt (rebuild.go), WO until it is made
	// RW or fails.
	wo atomic.Bool
}

func (m *member) rw() bool { return !m.failed.Load() && !m.wo.Load() }

// rebuilding tells whether the member is WO: it takes writes, after the
// RW ones.
func (m *member) rebuilding() bool { return !m.failed.Load() && m.wo.Load() }

func (m *member) mode() Mode {
	switch {
	case m.failed.Load():
		return ModeERR
	case m.wo.Load():
		return ModeWO
	}
	return ModeRW
}

// PurgeStatus is the state of the last purge.
type PurgeStatus struct {
	IsPurging bool
	Progress  int
	State     string
	Error     string
}

// Engine is one volume's engine.
type Engine struct {
	name  string
	clock clock.Clock
	log   *logrus.Entry

	// mu orders I/O against snapshot changes: I/O holds it shared, a
	// snapshot, revert or purge holds it exclusively, so every replica
	// freezes the same data.
	mu       sync.RWMutex
	replicas []*member
	frontend bool
	// atOnce: the engine has remote replicas, and a write goes to all its
	// replicas at once, not one after the other (a round trip each).
	atOnce bool
	// fenced is why the engine serves no more, once a replica refused it
	// with replica.ErrFenced (fence.go).
	fenced atomic.Pointer[error]
	// size is the volume's size: that of its RW replicas, which Expand
	// grows together (an ERR replica may have another).
	size atomic.Int64

	// failMu orders replica failures: the epoch of the replicas that
	// carry on is raised (see replica.Replica.Epoch) before a failed
	// replica is marked ERR, so no write is acknowledged without it
	// before its being behind is recorded.
	failMu sync.Mutex
	epoch  uint64

	purgeMu sync.Mutex
	purge   PurgeStatus
	purged  purgedNames
	// purging counts the purge running in the background; Close waits
	// for it, so no purge touches a replica's files after Close.
	purging sync.WaitGroup
	// closed is set by Close under purgeMu: no purge starts after it, and
	// one that waited for mu finds the replicas closed and does nothing.
	closed atomic.Bool

	backupMu sync.Mutex
	backups  map[string]*BackupStatus
	// finishedBackups counts the backups finished, to order them.
	finishedBackups uint64
	restore         RestoreStatus
	clone           CloneStatus

	// holds are the snapshots reads keep from deletion, by name.
	holdMu sync.Mutex
	holds  map[string]*snapshotHold

	// changed is called after any change callers may want to observe.
	changed func()
	// generation moves with every change of what the engine reports,
	// progress included (which does not call changed).
	generation atomic.Uint64
	// status is the last Status read and the generation it was read at:
	// the controllers that read the engine share one read per change.
	statusMu sync.Mutex
	status   *statusAt
	// called counts the calls of the control API, for metrics.
	called func(call string)

	// opts are the options New was given: a replica joined later is
	// opened with the same term, TLS and timeouts.
	opts options
	// rebuild is the rebuild that runs, and the last of each replica
	// (rebuild.go).
	rebuild rebuildState
}

// New returns the engine of volume name over the given replicas. Only the
// replicas whose data is current are RW: one whose epoch is below
// another's (one of them, or one KeptOut) failed while an engine ran, and
// missed the writes acknowledged after; it starts ERR, as do the replicas
// named by Behind. Nothing brings an ERR replica back to RW in the engine.
// When no replica is current, New fails with ErrNoHealthyReplica and says
// why.
//
// The replicas given are of this process; Remote adds replicas another
// process serves, which New opens over the replica protocol, with the
// engine's Term. The engine holds them all from then on (Close closes
// them); when New fails, it closes the remote ones and leaves the others
// to the caller, as before.
func New(name string, replicas map[string]*replica.Replica, clk clock.Clock, log *logrus.Entry, opts ...Option) (*Engine, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if w := o.owner; w != nil && (w.volumeUID == "" || w.instance == "" || w.term == 0) {
		return nil, fmt.Errorf("volume %s: a term names the volume's UID and the engine instance, and is above 0 (%q, %q, %d)", name, w.volumeUID, w.instance, w.term)
	}
	held := make(map[string]Replica, len(replicas)+len(o.remotes))
	for n, r := range replicas {
		if _, ok := o.remotes[n]; ok {
			return nil, fmt.Errorf("volume %s: replica %s is given both here and remote, at %s", name, n, o.remotes[n])
		}
		held[n] = r
		if o.owner == nil {
			continue
		}
		if err := r.AcceptTerm(o.owner.term, o.owner.instance); err != nil {
			return nil, fmt.Errorf("volume %s: replica %s: take term %d: %w", name, n, o.owner.term, err)
		}
		held[n] = r.AtTerm(o.owner.term, o.owner.instance)
	}
	remotes, err := openRemotes(name, o)
	if err != nil {
		return nil, err
	}
	for n, r := range remotes {
		held[n] = r
	}
	e, err := start(name, held, clk, log, o)
	if err != nil {
		for _, r := range remotes {
			r.Close()
		}
		return nil, err
	}
	return e, nil
}

// start starts the engine over replicas, which it holds from then on.
func start(name string, replicas map[string]Replica, clk clock.Clock, log *logrus.Entry, o options) (*Engine, error) {
	if len(replicas) == 0 {
		return nil, fmt.Errorf("volume %s: an engine needs at least one replica", name)
	}
	e := &Engine{name: name, clock: clk, log: log.WithField("volume", name), changed: func() {}, called: func(string) {}, backups: map[string]*BackupStatus{},
		atOnce: len(o.remotes) > 0, opts: o}
	names := make([]string, 0, len(replicas))
	for n := range replicas {
		names = append(names, n)
	}
	// The replicas of this process first, each kind by name: reads go to
	// the first healthy one, and a local read costs no round trip.
	sort.Slice(names, func(i, j int) bool {
		ri, rj := o.remotes[names[i]] != "", o.remotes[names[j]] != ""
		if ri != rj {
			return rj
		}
		return names[i] < names[j]
	})
	latest := ""
	for _, n := range names {
		r := replicas[n]
		if _, behind := o.behind[n]; !behind && (latest == "" || r.Epoch() > e.epoch) {
			e.epoch, latest = r.Epoch(), n
		}
	}
	kept := make([]string, 0, len(o.keptOut))
	for n := range o.keptOut {
		kept = append(kept, n)
	}
	sort.Strings(kept)
	for _, n := range kept {
		if o.keptOut[n] > e.epoch {
			e.epoch, latest = o.keptOut[n], n+" (failed, not opened)"
		}
	}
	for _, n := range names {
		r := replicas[n]
		m := &member{name: n, r: r, remote: o.remotes[n]}
		why, behind := o.behind[n]
		if rb, ok := r.(interface{ Rebuilding() bool }); ok && !behind && rb.Rebuilding() {
			behind = true
			why = "its rebuild did not finish: its chain is not complete"
		}
		if !behind && r.Epoch() < e.epoch {
			behind = true
			why = fmt.Sprintf("its data is behind replica %s's (epoch %d, not %d): it failed while an engine ran, and missed the writes that followed", latest, r.Epoch(), e.epoch)
		}
		if behind {
			m.failed.Store(true)
			m.err, m.behind = why, true
			e.log.WithFields(logrus.Fields{"replica": n, "reason": why}).Warn("Replica is not used: it needs a rebuild from a healthy replica")
		}
		e.replicas = append(e.replicas, m)
	}
	if len(e.healthy()) > 0 {
		if err := e.evenSizes(); err != nil {
			return nil, err
		}
	}
	if len(e.healthy()) == 0 {
		why := make([]string, 0, len(e.replicas))
		for _, m := range e.replicas {
			why = append(why, "replica "+m.name+": "+m.err)
		}
		return nil, fmt.Errorf("volume %s: %w: no replica it opens is current: %s", name, ErrNoHealthyReplica, strings.Join(why, "; "))
	}
	return e, nil
}

// OnChange sets a function called after snapshots or replica modes change.
func (e *Engine) OnChange(f func()) { e.changed = f }

// OnCall sets a function called with the method's name at each call of
// the control API (snapshots, purge, backups, status reads; not I/O).
// Set it before the engine is shared.
func (e *Engine) OnCall(f func(call string)) { e.called = f }

// Generation moves with every change of what the control API reports:
// snapshots, replica modes, purge, backup and restore progress. A status
// mirror that read the engine at one generation need not read it again
// until the generation moves. Reading it is not a call of the engine.
func (e *Engine) Generation() uint64 { return e.generation.Load() }

// notify records a change and tells the OnChange function, in the
// background so a caller holding the engine's locks is not blocked.
func (e *Engine) notify() {
	e.generation.Add(1)
	go e.changed()
}

// Name is the volume name.
func (e *Engine) Name() string { return e.name }

// Size is the volume size.
func (e *Engine) Size() int64 { return e.size.Load() }

// SetFrontend records whether a frontend serves the volume; revert is
// refused while one does.
func (e *Engine) SetFrontend(on bool) {
	e.mu.Lock()
	e.frontend = on
	e.mu.Unlock()
}

// ReplicaModes reports each replica's mode and last error.
func (e *Engine) ReplicaModes() map[string]Mode {
	e.called("ReplicaModes")
	return e.replicaModes()
}

func (e *Engine) replicaModes() map[string]Mode {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := map[string]Mode{}
	for _, m := range e.replicas {
		out[m.name] = m.mode()
	}
	return out
}

// ReadAt reads from the first healthy replica, failing over to the next.
func (e *Engine) ReadAt(p []byte, off int64) (int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if off < 0 || off+int64(len(p)) > e.Size() {
		return 0, fmt.Errorf("%w: range %d+%d is outside the volume", ErrInvalid, off, len(p))
	}
	if err := e.Fenced(); err != nil {
		return 0, err
	}
	for _, m := range e.replicas {
		if !m.rw() {
			continue
		}
		n, err := m.r.ReadAt(p, off)
		if err == nil {
			return n, nil
		}
		e.fail(m, err)
		if err := e.Fenced(); err != nil {
			return 0, err
		}
	}
	return 0, ErrNoHealthyReplica
}

// WriteAt writes to every healthy replica; a replica that fails is
// dropped, and the write succeeds while one replica took it.
func (e *Engine) WriteAt(p []byte, off int64) (int, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if off < 0 || off+int64(len(p)) > e.Size() {
		return 0, fmt.Errorf("%w: range %d+%d is outside the volume", ErrInvalid, off, len(p))
	}
	if err := e.onWritable(func(r Replica) error { _, err := r.WriteAt(p, off); return err }); err != nil {
		return 0, err
	}
	e.writeRebuilding(p, off)
	return len(p), nil
}

// onWritable does op on every replica that takes writes, failing each
// whose op fails; it is ErrNoHealthyReplica when none did it, and the
// engine's fence once a replica refused it so. The caller holds e.mu.
// With remote replicas op runs on all at once, and the failures are
// dealt with once every replica answered.
func (e *Engine) onWritable(op func(Replica) error) error {
	if err := e.Fenced(); err != nil {
		return err
	}
	ok := 0
	if e.atOnce {
		ok = e.onWritableAtOnce(op)
	} else {
		for _, m := range e.replicas {
			if !m.rw() {
				continue
			}
			if err := op(m.r); err != nil {
				e.fail(m, err)
				if e.Fenced() != nil {
					break
				}
				continue
			}
			ok++
		}
	}
	if err := e.Fenced(); err != nil {
		return err
	}
	if ok == 0 {
		return ErrNoHealthyReplica
	}
	return nil
}

// onWritableAtOnce is onWritable's loop over replicas some of which are
// remote: op runs on each in a goroutine of its own but the first.
func (e *Engine) onWritableAtOnce(op func(Replica) error) int {
	members := e.healthy()
	if len(members) == 0 {
		return 0
	}
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members[1:] {
		wg.Go(func() { errs[i+1] = op(m.r) })
	}
	errs[0] = op(members[0].r)
	wg.Wait()
	// A refusal for a newer engine first: the others' failures then
	// change nothing.
	for i, m := range members {
		if errors.Is(errs[i], replica.ErrFenced) {
			e.fence(m, errs[i])
			return 0
		}
	}
	ok := 0
	for i, m := range members {
		if errs[i] != nil {
			e.fail(m, errs[i])
			continue
		}
		ok++
	}
	return ok
}

// Trim gives back the space of [off, off+length) on every replica that
// takes writes (replica.Trim): what a filesystem's discards become,
// through the NBD frontend (a mount with discard, fstrim, the
// filesystem-trim job). A snapshot a backup or an export reads is held
// and cannot be marked removed, so a trim leaves it; a removed snapshot
// that some replica's view reads all the same is kept on every replica,
// so that they all read the same after the trim.
func (e *Engine) Trim(off, length int64) error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if off < 0 || length < 0 || off+length > e.Size() {
		return fmt.Errorf("%w: trim of %d+%d is outside the volume", ErrInvalid, off, length)
	}
	var viewed []string
	for _, m := range e.replicas {
		if l, ok := m.r.(LayerReader); ok && m.rw() {
			viewed = append(viewed, l.ViewedSnapshots()...)
		}
	}
	if err := e.onWritable(func(r Replica) error { return r.TrimKeeping(off, length, viewed) }); err != nil {
		return err
	}
	e.onRebuilding(func(r Replica) error { return r.TrimKeeping(off, length, viewed) })
	return nil
}

// Sync makes every healthy replica's data durable.
func (e *Engine) Sync() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if err := e.onWritable(Replica.Sync); err != nil {
		return err
	}
	e.onRebuilding(Replica.Sync)
	return nil
}

func (e *Engine) healthy() []*member {
	var out []*member
	for _, m := range e.replicas {
		if m.rw() {
			out = append(out, m)
		}
	}
	return out
}

// Close closes the replicas, after a purge that holds them ends; a purge
// that has not begun does nothing.
func (e *Engine) Close() error {
	e.purgeMu.Lock()
	e.closed.Store(true)
	e.purgeMu.Unlock()
	e.stopRebuild()
	e.mu.Lock()
	for _, m := range e.replicas {
		m.r.Close()
	}
	e.mu.Unlock()
	e.purging.Wait()
	return nil
}
