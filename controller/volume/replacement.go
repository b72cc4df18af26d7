package volume

// A volume that lost a replica (marked failed) gets a new one in its
// place, rebuilt from a healthy replica into its running engine
// (docs/design-data-plane.md, "Failure and rebuild"): placeReplicas
// places it, one at a time, and startRebuild starts its rebuild once its
// engine runs here and, for a replica of another node, that node serves
// it.

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/controller/replica"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// countActive counts the replicas that are not marked failed nor being
// deleted: those numberOfReplicas asks for.
func countActive(replicas []*longhorn.Replica) int {
	n := 0
	for _, r := range replicas {
		if r.Spec.FailedAt == "" && r.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

// holdsData says whether a replica of the volume has been opened (or
// failed, which only one an engine had can): a new one is then rebuilt
// from a healthy one, never opened empty beside them.
func holdsData(replicas []*longhorn.Replica) bool {
	for _, r := range replicas {
		if r.Spec.HealthyAt != "" || r.Spec.FailedAt != "" {
			return true
		}
	}
	return false
}

// openable are the replicas an engine start opens: all but those made in
// place of a lost one (AnnotationRebuildTarget) that were never opened,
// which are rebuilt into the running engine, never opened empty beside
// the data.
func openable(replicas []*longhorn.Replica) []*longhorn.Replica {
	out := make([]*longhorn.Replica, 0, len(replicas))
	for _, r := range replicas {
		if !awaitingRebuild(r) {
			out = append(out, r)
		}
	}
	return out
}

// awaitingRebuild says whether r was made in place of a lost replica and
// has not joined an engine yet.
func awaitingRebuild(r *longhorn.Replica) bool {
	return r.Annotations[types.AnnotationRebuildTarget] != "" && r.Spec.HealthyAt == "" && r.Spec.FailedAt == ""
}

// maxFailedReplicas bounds the failed replicas a volume keeps before no
// new one is placed: each failed rebuild leaves one (its data is kept, as
// only a user deletes data), and a rebuild that keeps failing must not
// fill the disks with them.
const maxFailedReplicas = 10

// replacementRefusal says why a volume whose data exists gets no new
// replica now ("" when it does), and when to look again (0: at the next
// change).
func (c *Controller) replacementRefusal(v *longhorn.Volume, replicas []*longhorn.Replica) (string, time.Duration) {
	if v.Spec.NodeID != c.ownership.NodeID {
		return fmt.Sprintf("volume %s holds data: a replica in place of a failed or missing one is rebuilt into its running engine, so it is placed once the volume is attached", v.Name), 0
	}
	if _, running := c.instances.Get(v.Name); !running {
		return fmt.Sprintf("volume %s holds data: a new replica is placed once its engine runs, to be rebuilt into it", v.Name), 0
	}
	if v.Spec.BackingImage != "" {
		return fmt.Sprintf("volume %s is on backing image %s: a replica on a backing image is not rebuilt yet", v.Name, v.Spec.BackingImage), 0
	}
	limit, err := c.ds.GetSettingAsInt(types.SettingNameConcurrentReplicaRebuildPerNodeLimit)
	if err == nil && limit == 0 {
		return fmt.Sprintf("%s is 0: no replica is rebuilt", types.SettingNameConcurrentReplicaRebuildPerNodeLimit), 0
	}
	failed := 0
	for _, r := range replicas {
		switch {
		case r.DeletionTimestamp != nil:
		case r.Spec.FailedAt != "":
			failed++
		case awaitingRebuild(r):
			return fmt.Sprintf("replica %s is to be rebuilt: one new replica at a time", r.Name), 0
		}
	}
	if failed >= maxFailedReplicas {
		return fmt.Sprintf("volume %s has %d failed replicas: no new one is placed until some are removed", v.Name, failed), 0
	}
	// A failed replica of a node that is down may come back: wait for it
	// replica-replenishment-wait-interval after it failed.
	wait, err := c.ds.GetSettingAsInt(types.SettingNameReplicaReplenishmentWaitInterval)
	if err != nil {
		wait = 600
	}
	now := c.clock.Now()
	var until time.Time
	var down []string
	for _, r := range replicas {
		if r.Spec.FailedAt == "" || r.DeletionTimestamp != nil || c.ownership.IsUp(r.Spec.NodeID) {
			continue
		}
		at, err := time.Parse(time.RFC3339, r.Spec.FailedAt)
		if err != nil {
			continue
		}
		if end := at.Add(time.Duration(wait) * time.Second); end.After(now) {
			down = append(down, fmt.Sprintf("%s (node %s)", r.Name, r.Spec.NodeID))
			if end.After(until) {
				until = end
			}
		}
	}
	if len(down) > 0 {
		sort.Strings(down)
		return fmt.Sprintf("waiting until %s for the nodes of failed replicas %s to come back (%s)", until.UTC().Format(time.RFC3339),
			strings.Join(down, ", "), types.SettingNameReplicaReplenishmentWaitInterval), until.Sub(now) + time.Second
	}
	return "", 0
}

// startRebuild starts the rebuild of the volume's new replica into its
// running engine e (status: the Engine's, as just mirrored) when one is
// waiting for it: a replica made but never opened, not in the engine, no
// rebuild running, its node below concurrent-replica-rebuild-per-node-limit,
// and served by its node when it is another's. It returns what it could
// not start, for the Scheduled condition's message ("" when nothing waits
// or it started).
func (c *Controller) startRebuild(v *longhorn.Volume, e instance.Engine, status *longhorn.EngineStatus, replicas []*longhorn.Replica) string {
	if !holdsData(replicas) {
		return ""
	}
	for _, rs := range status.RebuildStatus {
		if rs.IsRebuilding {
			return ""
		}
	}
	for _, r := range replicas {
		if !awaitingRebuild(r) || r.DeletionTimestamp != nil {
			continue
		}
		if _, in := status.ReplicaModeMap[r.Name]; in {
			continue
		}
		rr := instance.RebuildReplica{Name: r.Name}
		if r.Spec.NodeID == c.ownership.NodeID {
			rr.Dir = replicaDir(r)
		} else if rr.Address = replica.ServedAddress(r); rr.Address == "" || !c.ownership.IsUp(r.Spec.NodeID) {
			return fmt.Sprintf("replica %s waits for node %s to serve it, to be rebuilt", r.Name, r.Spec.NodeID)
		}
		if why := c.rebuildLimitReached(r.Spec.NodeID); why != "" {
			return why
		}
		log := c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": r.Name, "replicaNode": r.Spec.NodeID})
		if err := e.StartRebuild(rr, ""); err != nil {
			if errors.Is(err, instancemanager.ErrUnimplemented) {
				return fmt.Sprintf("replica %s: the engine's instance manager is of a version that does not rebuild; it does once the volume's engine runs in a newer one (at its next attach)", r.Name)
			}
			log.WithError(err).Warn("Could not start the replica's rebuild")
			if errors.Is(err, volumeengine.ErrPrecondition) {
				return fmt.Sprintf("replica %s: rebuild waits: %v", r.Name, err)
			}
			return fmt.Sprintf("replica %s: rebuild: %v", r.Name, err)
		}
		log.Info("Started the replica's rebuild from a healthy one")
		return ""
	}
	return ""
}

// rebuildLimitReached says whether node has
// concurrent-replica-rebuild-per-node-limit rebuilds running already, by
// the Engines' status.
func (c *Controller) rebuildLimitReached(node string) string {
	limit, err := c.ds.GetSettingAsInt(types.SettingNameConcurrentReplicaRebuildPerNodeLimit)
	if err != nil {
		return ""
	}
	engines, err := c.ds.ListEnginesRO()
	if err != nil {
		return ""
	}
	running := 0
	for _, e := range engines {
		for name, rs := range e.Status.RebuildStatus {
			if !rs.IsRebuilding {
				continue
			}
			if r, err := c.ds.GetReplicaRO(name); err == nil && r.Spec.NodeID == node {
				running++
			}
		}
	}
	if running >= limit {
		return fmt.Sprintf("node %s has %d rebuilds running (%s %d)", node, running, types.SettingNameConcurrentReplicaRebuildPerNodeLimit, limit)
	}
	return ""
}
