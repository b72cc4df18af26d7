package controller

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

// VolumeController reconciles Volumes. So far it keeps the recurring-job
// labels right: a volume that selects no job and no group is in the
// default group, and leaves it once it selects anything else.
type VolumeController struct {
	*baseController
	ds        *datastore.DataStore
	ownership ownership
}

// NewVolumeController wires the controller to the Volume informer.
func NewVolumeController(logger *logrus.Entry, metrics *Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string) *VolumeController {
	informer := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	c := &VolumeController{ds: ds, ownership: ownership{nodeID: nodeID, isUp: ds.IsNodeUp}}
	c.baseController = newBaseController("longhorn-volume", logger, metrics, c.sync, informer.HasSynced)
	informer.AddEventHandler(c.eventHandler())
	return c
}

func (c *VolumeController) sync(ctx context.Context, key string) error {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	v, err := c.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The node a volume is attached to owns it.
	if !c.ownership.responsible(v.Status.OwnerID, v.Spec.NodeID) {
		return nil
	}
	if v.Status.OwnerID != c.ownership.nodeID {
		claimed := v.DeepCopy()
		claimed.Status.OwnerID = c.ownership.nodeID
		if _, err := c.ds.UpdateVolumeStatus(ctx, claimed); err != nil {
			return fmt.Errorf("claim volume %s: %w", name, err)
		}
		c.logger.WithFields(logrus.Fields{"volume": name, "previousOwner": v.Status.OwnerID}).Info("Took ownership of the volume")
		return nil
	}
	if v.DeletionTimestamp != nil {
		return nil
	}
	if _, changed := datastore.FixupRecurringJobLabels(v.Labels); !changed {
		return nil
	}
	if _, err := c.ds.UpdateVolumeLabels(ctx, name, func(map[string]string) bool { return false }); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("fix recurring-job labels of volume %s: %w", name, err)
	}
	c.logger.WithField("volume", name).Debug("Applied the default recurring-job group rule")
	return nil
}
