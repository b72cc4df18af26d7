package replica

import (
	"context"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// reasonVolumeDeleted: the DataDeleted condition's reason.
const reasonVolumeDeleted = "VolumeDeleted"

// volumeDeleted says whether r's volume is being deleted, the very volume
// r belongs to (by the UID of its owner reference): only then is a
// replica's data deleted, at the user's request. A volume that is missing
// deletes nothing: a restored system, say, may bring it back.
func volumeDeleted(r *longhorn.Replica, v *longhorn.Volume) bool {
	if v == nil || v.DeletionTimestamp == nil {
		return false
	}
	for _, o := range r.OwnerReferences {
		if o.Kind == "Volume" && o.UID == v.UID {
			return true
		}
	}
	return false
}

// deleteData deletes the data of this node's replica r, whose volume is
// being deleted, and records it in the Replica's DataDeleted condition:
// the manager deleting the volume, on another node, waits for it
// (DataDeleted). It does not wait for the volume's engine to stop: that
// manager stops it, but need not say so in the Engine's status, and an
// engine still writing to a volume its user deleted loses nothing; the
// replica is no longer served first.
func (c *Controller) deleteData(ctx context.Context, r *longhorn.Replica, log *logrus.Entry) (kit.Result, error) {
	if DataDeleted(r) {
		return kit.Result{}, nil
	}
	if err := c.stop(r.Name, log, "its volume is being deleted"); err != nil {
		return kit.Result{}, err
	}
	dir, err := c.replicaDir(r)
	if err != nil {
		return kit.Result{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return kit.Result{}, fmt.Errorf("volume %s: delete the data of replica %s at %s: %w", r.Spec.VolumeName, r.Name, dir, err)
	}
	updated := r.DeepCopy()
	updated.Status.IP, updated.Status.StorageIP, updated.Status.Port = "", "", 0
	updated.Status.Conditions = kit.SetCondition(updated.Status.Conditions, longhorn.ReplicaConditionTypeDataDeleted, longhorn.ConditionStatusTrue,
		reasonVolumeDeleted, "deleted "+dir, c.clock.Now())
	if _, err := c.ds.UpdateReplicaStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, fmt.Errorf("update status of replica %s: %w", r.Name, err)
	}
	log.WithField("dir", dir).Info("Deleted the replica's data: its volume is being deleted")
	return kit.Result{}, nil
}

// DataDeleted says whether r's node deleted its data.
func DataDeleted(r *longhorn.Replica) bool {
	return kit.GetCondition(r.Status.Conditions, longhorn.ReplicaConditionTypeDataDeleted).Status == longhorn.ConditionStatusTrue
}
