package backup

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// engineBackupTarget is the target an engine's backup goes to: the one
// its URL names (the engine gives the URL from the start), "" when that
// is no target's any more (deleted while the backup ran: the backup is
// no target's to mirror, and none other's to mark interrupted); with no
// URL (an engine of an older manager), the volume's spec.backupTargetName,
// else default.
func (c *TargetController) engineBackupTarget(e *longhorn.Engine, st *longhorn.EngineBackupStatus) string {
	if st.BackupURL != "" {
		target, _, _, err := backupstore.ParseURL(st.BackupURL)
		if err != nil {
			return ""
		}
		t, err := c.ds.TargetForURL(target)
		if err != nil {
			return ""
		}
		return t.Name
	}
	if v, err := c.ds.GetVolumeRO(e.Spec.VolumeName); err == nil {
		return datastore.TargetName(v.Spec.BackupTargetName)
	}
	return datastore.DefaultBackupTargetName
}

// syncGoneTarget removes the objects of a BackupTarget that no longer
// exists (a user deleted it): they are forgotten as objects gone from a
// target are, labelled delete-custom-resource-only, so nothing is
// deleted from that target or any other. A user's deletion of one of
// them waiting on its finalizer is released the same way. One node does
// it: default's owner. The default target is never gone (it is made
// again from the settings).
func (c *TargetController) syncGoneTarget(ctx context.Context, target string) error {
	target = datastore.TargetName(target)
	if target == datastore.DefaultBackupTargetName {
		return nil
	}
	if _, owned, err := c.ownedTarget(ctx, datastore.DefaultBackupTargetName); err != nil || !owned {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	log := c.Logger.WithFields(logrus.Fields{"backupTarget": target, "reason": "the BackupTarget was deleted"})
	backups, err := c.ds.ListBackupsRO("")
	if err != nil {
		return err
	}
	var errs []error
	for _, b := range backups {
		if datastore.BackupTargetOf(b) != target {
			continue
		}
		errs = append(errs, c.forgetObject(ctx, b))
	}
	bvs, err := c.ds.ListBackupVolumesRO()
	if err != nil {
		return err
	}
	for _, bv := range bvs {
		if datastore.BackupVolumeTarget(bv) != target {
			continue
		}
		if err := c.forgetBackupVolume(ctx, bv); err != nil {
			errs = append(errs, err)
			continue
		}
		if bv.DeletionTimestamp != nil && kit.HasFinalizer(bv) {
			updated := bv.DeepCopy()
			kit.RemoveFinalizer(updated)
			if _, err := c.ds.UpdateBackupVolume(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.lastPoll, target)
	c.mu.Unlock()
	log.Debug("Removed the objects of a deleted backup target, deleting nothing from any target")
	return nil
}

// forgetObject forgets a Backup (forget), and releases it when a user's
// deletion of it waits on its finalizer.
func (c *TargetController) forgetObject(ctx context.Context, b *longhorn.Backup) error {
	if err := c.forget(ctx, b); err != nil {
		return err
	}
	if b.DeletionTimestamp == nil || !kit.HasFinalizer(b) {
		return nil
	}
	fresh, err := c.ds.GetBackupFresh(ctx, b.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	kit.RemoveFinalizer(fresh)
	if _, err := c.ds.UpdateBackup(ctx, fresh); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
