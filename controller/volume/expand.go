package volume

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// expansionRetry is how soon an expansion the engine refused (a restore
// running, a replica that failed to grow) is tried again.
const expansionRetry = 5 * time.Second

// expandEngine grows the running engine to size, the volume's spec.size
// (see expansionTarget), when the spec grew (the expand action,
// ControllerExpandVolume, kubectl), and records the engine's size in
// status.currentSize: the size the data plane has, which the API shows as
// the controller's actualSize. A failure is recorded in
// lastExpansionError and lastExpansionFailedAt and tried again; it never
// stops the volume from serving at its old size.
func (c *Controller) expandEngine(v *longhorn.Volume, size int64, e instance.Engine, status *longhorn.EngineStatus) {
	if from := e.Size(); size > from {
		log := c.Logger.WithFields(logrus.Fields{"volume": v.Name, "from": from, "to": size})
		if err := e.Expand(size); err != nil {
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

// expansionTarget is the size the volume's replicas are to have: its
// spec.size, unless that is a growth (beyond the size its replicas
// record) the disk that holds them has no room for, as spec.size written
// with kubectl may be (the API and the CSI driver refuse it before).
// Then it is the replicas' size, and refused says why.
func (c *Controller) expansionTarget(v *longhorn.Volume, replicas []*longhorn.Replica) (size int64, refused string, err error) {
	var have int64
	disk := ""
	for _, r := range replicas {
		have = max(have, r.Spec.VolumeSize)
		if disk == "" {
			disk = r.Spec.DiskID
		}
	}
	if len(replicas) == 0 || v.Spec.Size <= have || disk == "" {
		return v.Spec.Size, "", nil
	}
	room, err := c.ds.RoomiestDisk(disk, v.Name)
	if err != nil {
		return 0, "", err
	}
	if room.Holds(v.Spec.Size, len(replicas)) {
		return v.Spec.Size, "", nil
	}
	return have, fmt.Sprintf(refusalPrefix+"%d bytes is more than the disk that holds the volume's replicas has room for: %d replicas of %d bytes need %d bytes, the disk has %d (%s); the volume stays at %d bytes",
		v.Spec.Size, len(replicas), v.Spec.Size, v.Spec.Size*int64(len(replicas)), max(room.Room, 0), room.Describe(), have), nil
}

// refusalPrefix starts the lastExpansionError of a growth
// expansionTarget refused.
const refusalPrefix = "spec.size: "

// recordExpansionRefusal records a growth expansionTarget refused in the
// Engine's lastExpansionError, and logs it once; a refusal no longer in
// force is cleared.
func (c *Controller) recordExpansionRefusal(v *longhorn.Volume, status *longhorn.EngineStatus, refused string) {
	if refused == "" && strings.HasPrefix(status.LastExpansionError, refusalPrefix) {
		status.LastExpansionError, status.LastExpansionFailedAt = "", ""
	}
	if refused == "" || status.LastExpansionError == refused {
		return
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "size": v.Spec.Size, "reason": refused}).Warn("Volume not grown: its disk has no room")
	status.LastExpansionError = refused
	status.LastExpansionFailedAt = c.clock.Now().UTC().Format(time.RFC3339)
}

// syncReplicaSizes records a growth to size in the spec.volumeSize of the
// volume's Replica objects, which the disks' capacity checks count. The
// data on disk grows with the engine (expandEngine); this is the
// accounting. The written objects replace those in replicas.
func (c *Controller) syncReplicaSizes(ctx context.Context, size int64, replicas []*longhorn.Replica) error {
	for i, r := range replicas {
		if r.Spec.VolumeSize >= size || r.DeletionTimestamp != nil {
			continue
		}
		updated := r.DeepCopy()
		updated.Spec.VolumeSize = size
		written, err := c.ds.UpdateReplica(ctx, updated)
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue // the next sync reads it again
		}
		if err != nil {
			return fmt.Errorf("record the size %d of replica %s: %w", size, r.Name, err)
		}
		replicas[i] = written
	}
	return nil
}

// syncEngineSize records size in the Engine's spec.volumeSize (the API's
// controllers[0].size), once the volume is to grow to it: Longhorn's UI
// shows an expansion not done while it differs from the volume's size.
func (c *Controller) syncEngineSize(ctx context.Context, e *longhorn.Engine, size int64) (*longhorn.Engine, error) {
	if e.Name == "" || e.Spec.VolumeSize >= size {
		return e, nil
	}
	updated := e.DeepCopy()
	updated.Spec.VolumeSize = size
	written, err := c.ds.UpdateEngine(ctx, updated)
	if err != nil {
		return nil, fmt.Errorf("record the size %d of engine %s: %w", size, e.Name, err)
	}
	return written, nil
}
