package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// expansionRetry is how soon an expansion the engine refused (a restore
// running, a replica that failed to grow) is tried again.
const expansionRetry = 5 * time.Second

// expandEngine grows the running engine to the volume's spec.size when
// the spec grew (the expand action, ControllerExpandVolume, kubectl), and
// records the engine's size in status.currentSize: the size the data
// plane has, which the API shows as the controller's actualSize. A
// failure is recorded in lastExpansionError and lastExpansionFailedAt and
// tried again; it never stops the volume from serving at its old size.
func (c *Controller) expandEngine(v *longhorn.Volume, e *volumeengine.Engine, status *longhorn.EngineStatus) {
	if from := e.Size(); v.Spec.Size > from {
		log := c.Logger.WithFields(logrus.Fields{"volume": v.Name, "from": from, "to": v.Spec.Size})
		if err := e.Expand(v.Spec.Size); err != nil {
			log.WithError(err).Warn("Could not grow the volume to its spec.size; trying again")
			status.LastExpansionError = err.Error()
			status.LastExpansionFailedAt = c.clock.Now().UTC().Format(time.RFC3339)
			c.Queue.AddAfter(c.ds.Namespace()+"/"+v.Name, expansionRetry)
		} else {
			log.Info("Grew the volume to its spec.size")
			status.LastExpansionError, status.LastExpansionFailedAt = "", ""
		}
	}
	status.IsExpanding = false
	status.CurrentSize = e.Size()
}

// syncReplicaSizes records a grown spec.size in the spec.volumeSize of
// the volume's Replica objects, which the disks' capacity checks count.
// The data on disk grows with the engine (expandEngine); this is the
// accounting. The written objects replace those in replicas.
func (c *Controller) syncReplicaSizes(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica) error {
	for i, r := range replicas {
		if r.Spec.VolumeSize >= v.Spec.Size || r.DeletionTimestamp != nil {
			continue
		}
		updated := r.DeepCopy()
		updated.Spec.VolumeSize = v.Spec.Size
		written, err := c.ds.UpdateReplica(ctx, updated)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // the next sync reads it again
		}
		if err != nil {
			return fmt.Errorf("record the size %d of replica %s: %w", v.Spec.Size, r.Name, err)
		}
		replicas[i] = written
	}
	return nil
}
