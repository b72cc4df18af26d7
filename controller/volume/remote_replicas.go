package volume

// A volume attached on a node that does not hold all its replicas: its
// engine runs here and reaches each replica of another node over the
// replica protocol, where that node serves it (controller/replica), with
// the term it takes from the Volume's status (docs/design-data-plane.md,
// "Replicas on other nodes").

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/node"
	"github.com/cadence-storage/longhorn-manager/controller/replica"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ReasonReplicasNotServed: the Attach condition's reason while a replica
// of another node is not served yet.
const ReasonReplicasNotServed = "ReplicasNotServed"

// remoteAllowed says whether the engine of v on node may reach replicas
// of other nodes: when v is attached there, or runs there for a clone of
// it to read (forClone), and neither restores a backup nor is made a
// clone (those write the replicas here, on this node's disks, where the
// scheduler places them all: keptOnOneNode), nor is strict-local (its
// I/O never on the network).
func remoteAllowed(v *longhorn.Volume, node string, forClone bool) bool {
	return (v.Spec.NodeID == node || forClone) && !v.Status.RestoreRequired && !cloneRequired(v) &&
		v.Spec.DataLocality != longhorn.DataLocalityStrictLocal
}

// localOnly are those of replicas on this node.
func (c *Controller) localOnly(replicas []*longhorn.Replica) []*longhorn.Replica {
	out := make([]*longhorn.Replica, 0, len(replicas))
	for _, r := range replicas {
		if r.Spec.NodeID == c.ownership.NodeID {
			out = append(out, r)
		}
	}
	return out
}

// notServedError says which replicas of other nodes are not served yet.
type notServedError struct{ msg string }

func (e *notServedError) Error() string { return e.msg }

// remoteReplicas are the replicas of v on other nodes that the engine
// here opens (not marked failed), where their nodes serve them; notServed
// names those not served yet (nil when every one is).
func (c *Controller) remoteReplicas(v *longhorn.Volume, replicas []*longhorn.Replica) (remotes []instance.RemoteReplica, notServed error) {
	var waiting []string
	for _, r := range replicas {
		if r.Spec.NodeID == c.ownership.NodeID || r.Spec.FailedAt != "" {
			continue
		}
		addr := replica.ServedAddress(r)
		if addr == "" || !c.ownership.IsUp(r.Spec.NodeID) {
			// A node that is down may have left its address behind.
			waiting = append(waiting, fmt.Sprintf("%s (node %q)", r.Name, r.Spec.NodeID))
			continue
		}
		remotes = append(remotes, instance.RemoteReplica{Name: r.Name, Address: addr, New: r.Spec.HealthyAt == ""})
	}
	if len(waiting) == 0 {
		return remotes, nil
	}
	sort.Strings(waiting)
	return remotes, &notServedError{fmt.Sprintf("volume %s waits for its replicas on other nodes to be served to its engine on node %q: %s; each node's manager serves its replicas over the replica protocol once the engine is to run elsewhere",
		v.Name, c.ownership.NodeID, strings.Join(waiting, ", "))}
}

// leaveUnreachable marks failed each replica of another node that is not
// served and whose node is down (its manager's Lease is stale), so that
// an engine that is to start here starts without it, as an engine drops
// a replica whose I/O fails: the volume attaches, degraded, rather than
// waiting for a node that may never come back. It does so only when
// another replica is left to start on (a local one, or one of a node that
// is up); the replica's data stays on its disk, and it stays out of the
// engine until it is rebuilt. It returns whether it marked any.
//
// A manager that started less than nodeDownGrace ago marks none: after a
// restart of the whole cluster every other node's Lease is stale until
// its manager is back, and an engine started at once would leave their
// replicas to be rebuilt for nothing. The volume waits, and is synced
// again once the grace is over.
func (c *Controller) leaveUnreachable(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica) (bool, error) {
	var down []int
	usable := 0
	for i, r := range replicas {
		switch {
		case r.Spec.FailedAt != "" || r.DeletionTimestamp != nil || awaitingRebuild(r):
			// Not one to start on: a replica awaiting its rebuild holds
			// nothing yet.
		case r.Spec.NodeID == c.ownership.NodeID || c.ownership.IsUp(r.Spec.NodeID):
			usable++
		default:
			down = append(down, i)
		}
	}
	if len(down) == 0 || usable == 0 {
		return false, nil
	}
	if wait := c.started.Add(nodeDownGrace).Sub(c.clock.Now()); wait > 0 {
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "wait": wait.Round(time.Second), "reason": "this manager has just started; other nodes' managers may be starting too"}).
			Info("Waiting before the engine starts without the replicas of nodes that are down")
		c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, wait)
		return false, nil
	}
	for _, i := range down {
		why := fmt.Sprintf("its node %s was down (its manager's heartbeat Lease is stale) when the volume's engine started on node %s, which started without it", replicas[i].Spec.NodeID, c.ownership.NodeID)
		if err := c.markNodeDown(ctx, v, replicas, i, why); err != nil {
			return false, err
		}
	}
	return true, nil
}

// markNodeDown marks replicas[i] failed, its node being down, with its
// Failed condition's reason NodeDown and why; the written object replaces
// it in replicas. Its data stays on its disk.
func (c *Controller) markNodeDown(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica, i int, why string) error {
	r := replicas[i]
	updated := r.DeepCopy()
	updated.Spec.FailedAt = c.clock.Now().UTC().Format(time.RFC3339)
	written, err := c.ds.UpdateReplica(ctx, updated)
	if err != nil {
		return fmt.Errorf("volume %s: mark replica %s failed, its node %s being down: %w", v.Name, r.Name, r.Spec.NodeID, err)
	}
	st := written.DeepCopy()
	st.Status.Conditions = kit.SetCondition(st.Status.Conditions, longhorn.ReplicaConditionTypeFailed, longhorn.ConditionStatusTrue,
		longhorn.ReplicaConditionReasonNodeDown, why, c.clock.Now())
	if w, err := c.ds.UpdateReplicaStatus(ctx, st); err == nil {
		written = w
	} else {
		// The next sync writes the Failed condition (FailedAtSet).
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": r.Name}).WithError(err).Warn("Could not record why the replica was marked failed")
	}
	replicas[i] = written
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": r.Name, "node": r.Spec.NodeID, "failedAt": updated.Spec.FailedAt, "why": why}).
		Error("Replica marked failed: its node is down; it does not join an engine again until it is rebuilt from a healthy replica")
	return nil
}

// takeTerm records the volume's next term in its status, before an engine
// starts with it, and returns the volume as written: the write carries
// the resource version, so two managers never take the same term.
func (c *Controller) takeTerm(ctx context.Context, v *longhorn.Volume) (*longhorn.Volume, error) {
	updated := v.DeepCopy()
	updated.Status.Term++
	written, err := c.ds.UpdateVolumeStatus(ctx, updated)
	if err != nil {
		return nil, fmt.Errorf("volume %s: take the engine's term %d: %w", v.Name, updated.Status.Term, err)
	}
	return written, nil
}

// remoteStartPause is how long after a failed start over remote replicas
// the next one waits: each takes a term, a write of the Volume, which
// would otherwise bring the next sync at once.
const remoteStartPause = 2 * time.Second

// nodeDownGrace is how long after its start a manager leaves replicas of
// nodes that are down out of the engines it starts: a heartbeat Lease's
// duration, the time a manager starting beside it has to renew its own.
const nodeDownGrace = node.HeartbeatDuration

// remoteStarts records when each volume's last start over remote
// replicas failed.
type remoteStarts struct {
	mu     sync.Mutex
	failed map[string]time.Time
}

// wait is how long the volume's next start over remote replicas waits.
func (r *remoteStarts) wait(volume string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.failed[volume]
	if !ok {
		return 0
	}
	return max(0, at.Add(remoteStartPause).Sub(now))
}

// done records the outcome of a start over remote replicas.
func (r *remoteStarts) done(volume string, err error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.failed, volume)
		return
	}
	if r.failed == nil {
		r.failed = map[string]time.Time{}
	}
	r.failed[volume] = now
}
