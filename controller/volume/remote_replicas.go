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
// scheduler places them all: keptOnOneNode).
func remoteAllowed(v *longhorn.Volume, node string, forClone bool) bool {
	return (v.Spec.NodeID == node || forClone) && !v.Status.RestoreRequired && !cloneRequired(v)
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
		if addr == "" {
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
