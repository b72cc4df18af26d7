package volume

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// cleanup runs while the volume is being deleted: the engine stops, the
// replicas' data on this node's disks goes, and the data of those of other
// nodes goes on their nodes (each replica's DataDeleted condition says
// when; a node that is down is not waited for), then the finalizer. The
// Engine and Replica objects follow through their owner references.
func (c *Controller) cleanup(ctx context.Context, v *longhorn.Volume) (kit.Result, error) {
	if !kit.HasFinalizer(v) {
		return kit.Result{}, nil
	}
	// The volume waits until its Snapshot objects are gone; the snapshot
	// controller releases them at once, as their data goes with the volume.
	snaps, err := c.ds.ListVolumeSnapshotsRO(v.Name)
	if err != nil {
		return kit.Result{}, err
	}
	if len(snaps) > 0 {
		for _, s := range snaps {
			if s.DeletionTimestamp == nil {
				if err := c.ds.DeleteSnapshot(ctx, s.Name); err != nil && !apierrors.IsNotFound(err) {
					return kit.Result{}, err
				}
			}
		}
		// Their deletions bring no event here: look again shortly.
		return kit.Result{RequeueAfter: time.Second}, nil
	}
	c.stopRestore(v.Name)
	c.stopClone(v.Name)
	if err := c.instances.Stop(v.Name); err != nil {
		c.Logger.WithError(err).WithField("volume", v.Name).Warn("Engine stopped with an error")
	}
	replicas, err := c.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return kit.Result{}, err
	}
	var waiting []string
	for _, r := range replicas {
		if r.Spec.DataDirectoryName == "" {
			continue
		}
		if r.Spec.NodeID != c.ownership.NodeID {
			// Its node deletes it (controller/replica), and says so.
			switch {
			case replica.DataDeleted(r):
			case c.ownership.IsUp(r.Spec.NodeID):
				waiting = append(waiting, fmt.Sprintf("%s (node %s)", r.Name, r.Spec.NodeID))
			default:
				c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replica": r.Name, "node": r.Spec.NodeID, "dir": replicaDir(r)}).
					Warn("The replica's node is down: its data stays on its disk, and the node deletes it if it comes back while the Replica is still there")
			}
			continue
		}
		if err := os.RemoveAll(replicaDir(r)); err != nil {
			return kit.Result{}, fmt.Errorf("volume %s: remove the data of replica %s: %w", v.Name, r.Name, err)
		}
	}
	if len(waiting) > 0 {
		c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replicas": waiting}).Debug("Waiting for the replicas' nodes to delete their data")
		// Their status writes bring the volume back; this is the bound
		// should one be missed.
		return kit.Result{RequeueAfter: 2 * time.Second}, nil
	}
	updated := v.DeepCopy()
	kit.RemoveFinalizer(updated)
	if _, err := c.ds.UpdateVolume(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "replicas": len(replicas)}).Info("Deleted the volume's data")
	return kit.Result{}, nil
}
