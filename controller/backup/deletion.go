package backup

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Only a user's request deletes a backup from the target: deleting its
// Backup object (kubectl, the API's backupDelete, a recurring job's
// retention). A Backup object the manager removes because the target no
// longer lists its backup (a volume.cfg gone, the target emptied or
// replaced by another bucket, an NFS share not mounted) is labelled
// LabelDeleteCustomResourceOnly first, and its finalizer deletes nothing.

// finishDeletions deletes from the target the backups of Backup objects a
// user deleted, then releases the objects. A deletion that cannot run now
// (a backup or restore of the volume is in progress, here or on another
// manager) is tried again soon (deletionRetryPeriod); it does not hold up
// the mirror. It returns the first failure to delete.
func (c *TargetController) finishDeletions(ctx context.Context, store *backupstore.Store, backups []*longhorn.Backup) error {
	var deleteErr error
	for _, b := range backups {
		if b.DeletionTimestamp == nil || !kit.HasFinalizer(b) {
			continue
		}
		vol := datastore.BackupVolumeName(b)
		log := c.Logger.WithFields(logrus.Fields{"backup": b.Name, "volume": vol, "backupTarget": datastore.BackupTargetOf(b)})
		switch {
		case b.Labels[types.LabelDeleteCustomResourceOnly] == "true":
			log = log.WithField("reason", "gone from the backup target")
		case vol == "":
			// Not a backup of any volume (made by hand): nothing in the
			// target can be it.
			log = log.WithField("reason", "names no volume")
		default:
			err := store.Delete(vol, b.Name)
			if errors.Is(err, backupstore.ErrLocked) {
				log.WithError(err).Info("Backup deletion waits for an operation on its volume")
				c.Queue.AddAfter(c.refreshKeyIn(datastore.BackupTargetOf(b), vol), deletionRetryPeriod)
				continue
			}
			if err != nil && !errors.Is(err, backupstore.ErrNotExist) {
				log.WithError(err).Warn("Could not delete the backup from the target")
				if deleteErr == nil {
					deleteErr = &targetError{fmt.Errorf("delete backup %s of volume %s from the target: %w", b.Name, vol, err)}
				}
				continue
			}
			log = log.WithField("reason", "deleted by a user")
		}
		updated := b.DeepCopy()
		kit.RemoveFinalizer(updated)
		if _, err := c.ds.UpdateBackup(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if b.Labels[types.LabelDeleteCustomResourceOnly] == "true" || vol == "" {
			log.Info("Removed the Backup object; nothing was deleted from the target")
		} else {
			log.Info("Deleted backup from the target")
		}
	}
	return deleteErr
}

// forget deletes the object of a backup the target no longer lists,
// labelled first so that its finalizer deletes nothing from the target.
func (c *TargetController) forget(ctx context.Context, b *longhorn.Backup) error {
	if b.Labels[types.LabelDeleteCustomResourceOnly] != "true" {
		updated := b.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[types.LabelDeleteCustomResourceOnly] = "true"
		if _, err := c.ds.UpdateBackup(ctx, updated); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("label Backup %s before removing it: %w", b.Name, err)
		}
	}
	if err := c.ds.DeleteBackup(ctx, b.Name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.Logger.WithFields(logrus.Fields{"backup": b.Name, "volume": datastore.BackupVolumeName(b), "backupTarget": datastore.BackupTargetOf(b)}).Info("Backup no longer in its backup target: removing its object, deleting nothing from the target")
	return nil
}
