package volumeengine

// Replicas another process serves over the replica protocol
// (engine/replicaproto, docs/design-data-plane.md "Replicas on other
// nodes"): how New opens them, the term that fences the engine, and the
// operations the protocol does not carry yet.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
)

// ErrNotCarried marks an operation on a remote replica that the replica
// protocol does not carry: reads of layers for backups, exports and
// clones (not yet), and a snapshot's deletion, a purge, a revert and a
// growth on a replica whose server speaks version 1 of the protocol (its
// instance manager is older than the engine's). The engine refuses it
// before it touches any replica, so its replicas never disagree over it.
// It comes with ErrPrecondition.
var ErrNotCarried = errors.New("not carried by the replica protocol yet")

// notCarried is the refusal of op on remote member m.
func notCarried(op string, m *member) error {
	return fmt.Errorf("%w: %s on remote replica %s at %s: %w", ErrPrecondition, op, m.name, m.remote, ErrNotCarried)
}

// refuseRemote refuses op, a change of the chain or the size, when one
// of members is a remote replica whose server speaks too old a version
// of the replica protocol to carry it.
func refuseRemote(op string, members []*member) error {
	for _, m := range members {
		if r, ok := m.r.(*remoteReplica); ok && !r.c.Carries() {
			return fmt.Errorf("%w: %s on remote replica %s at %s: its instance manager is older than this engine's, of replica protocol version %d (%d needed): %w",
				ErrPrecondition, op, m.name, m.remote, r.c.Version(), replicaproto.ProtocolVersion, ErrNotCarried)
		}
	}
	return nil
}

// owner is the engine instance and term an engine owns its replicas by.
type owner struct {
	volumeUID, instance string
	term                uint64
}

// Term makes the engine the owner of its replicas (docs/design-data-plane.md,
// "Two writers never happen: the term"), as engine instance instance of
// the volume of UID volumeUID, with term, which is above every term its
// replicas hold: New records it on each replica of this process
// (replica.AcceptTerm) and opens each remote one with it, and from then on
// a replica that a newer engine took refuses this one with
// replica.ErrFenced. The engine then serves no more (Fenced). Without
// Term (every engine before remote replicas) no term is taken or checked.
func Term(volumeUID, instance string, term uint64) Option {
	return func(o *options) { o.owner = &owner{volumeUID: volumeUID, instance: instance, term: term} }
}

// Remote adds replica name, which the replica server at address
// (host:port) serves over the replica protocol, to the replicas New is
// given; it needs Term.
func Remote(name, address string) Option {
	return func(o *options) {
		if o.remotes == nil {
			o.remotes = map[string]string{}
		}
		o.remotes[name] = address
	}
}

// ReplicaTLS is the client configuration remote replicas are reached with:
// the node's mutual-TLS identity's (mtls). Without it the protocol runs
// on plain TCP, as the tests run it on loopback.
func ReplicaTLS(config *tls.Config) Option { return func(o *options) { o.tls = config } }

// ReplicaTimeout is the deadline of each request to a remote replica
// (Longhorn's engine-replica-timeout; replicaproto.DefaultTimeout, 8 s,
// by default): a replica that does not answer within it is dropped, as
// one whose I/O fails is.
func ReplicaTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// ReplicaControlTimeout is the deadline of a purge and of a growth of a
// remote replica (replicaproto.DefaultControlTimeout, 10 minutes, by
// default): they may take far longer than an I/O.
func ReplicaControlTimeout(d time.Duration) Option { return func(o *options) { o.controlTimeout = d } }

// openRemotes opens the remote replicas of o at once, with the engine's
// term; on a failure it closes those it opened.
func openRemotes(volume string, o options) (map[string]*remoteReplica, error) {
	if len(o.remotes) == 0 {
		return nil, nil
	}
	if o.owner == nil {
		return nil, fmt.Errorf("volume %s: remote replicas are opened with a term, and the engine has none", volume)
	}
	timeout := o.timeout
	if timeout <= 0 {
		timeout = replicaproto.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var mu sync.Mutex
	opened := map[string]*remoteReplica{}
	var errs []error
	var wg sync.WaitGroup
	for name, addr := range o.remotes {
		wg.Go(func() {
			c, err := replicaproto.Dial(ctx, addr, o.tls, replicaproto.OpenRequest{
				VolumeUID: o.owner.volumeUID, Replica: name, Engine: o.owner.instance, Term: o.owner.term}, timeout,
				replicaproto.ControlTimeout(o.controlTimeout))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("remote replica %s at %s: %w", name, addr, err))
				return
			}
			r := &remoteReplica{name: name, addr: addr, c: c}
			r.epoch.Store(c.Opened().Epoch)
			opened[name] = r
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		for _, r := range opened {
			r.Close()
		}
		sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
		return nil, fmt.Errorf("volume %s: %w", volume, errors.Join(errs...))
	}
	return opened, nil
}

// remoteReplica is a replica another process serves, reached over one
// connection of the replica protocol that the engine's term opened: the
// I/O path, the epoch, snapshots, the chain and its changes go over it.
// A server of version 1 carries no change of the chain or the size: the
// engine refuses those before it gets here (refuseRemote), and they fail
// here too, naming themselves and the replica's address. It reads no
// layer of a remote replica (not a LayerReader).
type remoteReplica struct {
	name, addr string
	c          *replicaproto.Client
	// epoch is the replica's, as it answered the open and as the engine
	// set it since: nothing else sets it while the engine owns it.
	epoch atomic.Uint64
}

var _ Replica = (*remoteReplica)(nil)

func (r *remoteReplica) ReadAt(p []byte, off int64) (int, error)  { return r.c.ReadAt(p, off) }
func (r *remoteReplica) WriteAt(p []byte, off int64) (int, error) { return r.c.WriteAt(p, off) }
func (r *remoteReplica) Sync() error                              { return r.c.Sync() }

// TrimKeeping trims the range keeping the snapshots the views of the
// engine's local replicas read. A server of version 1 cannot be told
// keep, and need not be: a trim keeps a snapshot for a view only when
// the snapshot is marked removed, views open only on snapshots not
// removed, and no snapshot is marked removed while the engine has such a
// replica healthy (DeleteSnapshot is refused then). Either server keeps
// the views of its own process (replica.TrimKeeping).
func (r *remoteReplica) TrimKeeping(off, length int64, keep []string) error {
	if !r.c.Carries() {
		return r.c.Trim(off, length)
	}
	return r.c.TrimKeeping(off, length, keep)
}

// Size is the replica's size: when it was opened, or as Grow made it.
func (r *remoteReplica) Size() int64   { return r.c.Size() }
func (r *remoteReplica) Epoch() uint64 { return r.epoch.Load() }

func (r *remoteReplica) SetEpoch(epoch uint64) error {
	if err := r.c.SetEpoch(epoch); err != nil {
		return err
	}
	r.epoch.Store(epoch)
	return nil
}

func (r *remoteReplica) CreateSnapshotWithID(name, id string, userCreated bool, created time.Time, labels map[string]string) error {
	return r.c.Snapshot(replicaproto.SnapshotRequest{Name: name, ID: id, UserCreated: userCreated, Created: created, Labels: labels})
}

func (r *remoteReplica) Snapshots() ([]replica.Snapshot, error) { return r.c.Chain() }

// HasSnapshot lists the chain; a chain that cannot be listed has no
// snapshot, and the snapshot then taken fails on the replica all the same.
func (r *remoteReplica) HasSnapshot(name string) bool {
	list, err := r.c.Chain()
	if err != nil {
		return false
	}
	for _, s := range list {
		if s.Name == name {
			return true
		}
	}
	return false
}

// carried is err, an op the replica's server does not know, said as the
// engine says it.
func (r *remoteReplica) carried(err error) error {
	if errors.Is(err, replicaproto.ErrOldServer) {
		return fmt.Errorf("remote replica %s at %s: %w: %w", r.name, r.addr, err, ErrNotCarried)
	}
	return err
}

func (r *remoteReplica) MarkRemoved(name string) error { return r.carried(r.c.MarkRemoved(name)) }
func (r *remoteReplica) Revert(name string) error      { return r.carried(r.c.Revert(name)) }
func (r *remoteReplica) Grow(size int64) error         { return r.carried(r.c.Grow(size)) }

func (r *remoteReplica) Purge() ([]string, error) {
	purged, err := r.c.Purge()
	return purged, r.carried(err)
}

// Close ends the connection; the replica stays open in its server's
// process.
func (r *remoteReplica) Close() error { return r.c.Close() }
