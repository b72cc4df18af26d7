package systembackup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// attachWait bounds the wait for a volume a system backup attached.
const attachWait = 2 * time.Minute

// attacher names a system backup when it attaches a volume (the
// volume's longhorn.io/attached-by), as a recurring job's run does: only
// it detaches the volume by that name, and an attach by a user or a
// workload meanwhile takes the volume over and keeps it attached.
func attacher(sb string) string { return "system-backup/" + sb }

// errTakenOver: someone attached the volume before the system backup
// could.
var errTakenOver = errors.New("attached by another meanwhile")

// attachForBackup attaches a detached volume, in the system backup's
// name, on the node that holds the most of its replicas (where the
// backup reads its snapshot from a replica of the engine's node), and
// waits until its engine runs.
func (c *BackupController) attachForBackup(ctx context.Context, sb string, v *longhorn.Volume, log *logrus.Entry) error {
	replicas, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return err
	}
	if len(replicas) == 0 {
		return fmt.Errorf("volume %s has no replica to attach", v.Name)
	}
	node := datastore.ReplicasNode(replicas)
	if node == "" {
		return fmt.Errorf("volume %s has no replica placed on a node to attach it to", v.Name)
	}
	if err := c.updateVolume(ctx, v.Name, func(v *longhorn.Volume) (bool, error) {
		if v.Spec.NodeID != "" {
			return false, errTakenOver
		}
		v.Spec.NodeID = node
		if v.Annotations == nil {
			v.Annotations = map[string]string{}
		}
		v.Annotations[types.AnnotationAttachedBy] = attacher(sb)
		return true, nil
	}); err != nil {
		return err
	}
	log.WithField("node", node).Info("Attached the volume for its backup")
	deadline := time.Now().Add(attachWait)
	for {
		cur, err := c.ds.GetVolumeRO(v.Name)
		if err != nil {
			return err
		}
		e, err := c.ds.GetEngineRO(datastore.EngineName(v.Name))
		if err == nil && cur.Status.State == longhorn.VolumeStateAttached && e.Status.CurrentState == longhorn.InstanceStateRunning && e.Status.Port != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("volume %s not attached within %s for its backup", v.Name, attachWait)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// detachAfterBackup detaches a volume the system backup attached, unless
// someone took it over meanwhile.
func (c *BackupController) detachAfterBackup(ctx context.Context, sb, volume string, log *logrus.Entry) {
	err := c.updateVolume(ctx, volume, func(v *longhorn.Volume) (bool, error) {
		if v.Annotations[types.AnnotationAttachedBy] != attacher(sb) || v.Spec.NodeID == "" {
			return false, nil // taken over: left as it is
		}
		v.Spec.NodeID = ""
		delete(v.Annotations, types.AnnotationAttachedBy)
		return true, nil
	})
	if err != nil {
		log.WithError(err).Warn("The volume the system backup attached could not be detached; detach it by hand")
		return
	}
	log.Info("Detached the volume after its backup")
}

// updateVolume applies change to the newest version of the volume and
// writes it, retrying conflicts.
func (c *BackupController) updateVolume(ctx context.Context, name string, change func(*longhorn.Volume) (bool, error)) error {
	return datastore.RetryOnConflict(func() error {
		v, err := c.ds.GetVolumeFresh(ctx, name)
		if err != nil {
			return err
		}
		changed, err := change(v)
		if err != nil || !changed {
			return err
		}
		_, err = c.ds.UpdateVolume(ctx, v)
		return err
	})
}
