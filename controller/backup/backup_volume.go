package backup

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// syncRefresh reads one volume from the target and brings its objects in
// line: after a backup of it finished, a deletion of one of its backups
// or of the whole volume was asked, or a refresh was asked
// (spec.syncRequestedAt). The empty volume runs the deletions of Backup
// objects that name no volume, which read nothing.
func (c *TargetController) syncRefresh(ctx context.Context, t datastore.Target, volume string) (kit.Result, error) {
	w, err := c.loadWorld(t)
	if err != nil {
		return kit.Result{}, err
	}
	store, err := c.openTarget(ctx, t)
	if err != nil || store == nil {
		return c.refreshFailed(ctx, w, volume, err)
	}
	deleteErr := c.finishDeletions(ctx, store, w.deleting(volume, false))
	if volume == "" {
		return kit.Result{}, deleteErr
	}
	if bv := w.backupVolumes[volume]; bv != nil && bv.DeletionTimestamp != nil && kit.HasFinalizer(bv) {
		result, err := c.deleteBackupVolume(ctx, store, w, bv)
		if err != nil || bv.Labels[types.LabelDeleteCustomResourceOnly] != "true" {
			return result, err
		}
		// Gone from the target: what engines report of the volume's
		// backups still shows (a backup that failed as its volume left
		// the target, whose end brought this refresh).
		return result, c.mirrorEngines(ctx, w, volume)
	}
	if bv := w.backupVolumes[volume]; bv != nil && syncRequested(bv) {
		// Asked for: the volume's record is read too, though its
		// backups are the same (it may have been changed by hand).
		store.ForgetRecord(volume)
	}
	listing, err := store.ScanVolume(volume)
	if err != nil {
		return c.refreshFailed(ctx, w, volume, &targetError{fmt.Errorf("read volume %s in the backup target: %w", volume, err)})
	}
	if err := c.syncVolume(ctx, store, w, volume, listing); err != nil {
		return kit.Result{}, err
	}
	c.Logger.WithFields(logrus.Fields{"backupTarget": t.Name, "backupVolume": volume, "listed": listing != nil}).Debug("Refreshed the backup volume from the target")
	return kit.Result{}, deleteErr
}

// refreshFailed ends a refresh that could not read the target: what the
// volume's engines report is mirrored (a backup that failed for that
// reason shows its error), the failure is said as a poll says it, and
// not retried (a backoff of retries would read the target far more often
// than polls do); the next poll reads the volume.
func (c *TargetController) refreshFailed(ctx context.Context, w *world, volume string, err error) (kit.Result, error) {
	if volume != "" {
		if mirrorErr := c.mirrorEngines(ctx, w, volume); mirrorErr != nil {
			return kit.Result{}, errors.Join(err, mirrorErr)
		}
	}
	if !isTargetError(err) {
		return kit.Result{}, err
	}
	c.reportIfUnavailable(ctx, w.target, err)
	c.Logger.WithError(err).WithFields(logrus.Fields{"backupTarget": w.target, "backupVolume": volume}).Warn("Backup volume refresh could not read the backup target; the next poll reads it")
	return kit.Result{}, nil
}

// syncBackupVolume creates, updates or forgets a volume's BackupVolume:
// want is its status from the target, nil when the target holds nothing
// of the volume.
func (c *TargetController) syncBackupVolume(ctx context.Context, target string, bv *longhorn.BackupVolume, volume string, want *longhorn.BackupVolumeStatus) error {
	if want == nil {
		if bv == nil || bv.DeletionTimestamp != nil {
			return nil
		}
		return c.forgetBackupVolume(ctx, bv)
	}
	if bv == nil {
		created, err := c.createBackupVolume(ctx, target, volume)
		if err != nil || created == nil {
			return err
		}
		bv = created
	}
	if bv.DeletionTimestamp != nil {
		return nil
	}
	if !kit.HasFinalizer(bv) || bv.Spec.BackupTargetName == "" || bv.Spec.VolumeName == "" || bv.Labels[types.LabelBackupTarget] == "" {
		// Made before BackupVolumes had a finalizer (its deletion must
		// reach the target), or before there were several targets (it
		// is default's, of the volume it is named by): says so as new
		// objects do. Its name stays.
		updated := bv.DeepCopy()
		kit.AddFinalizer(updated)
		updated.Spec.BackupTargetName, updated.Spec.VolumeName = target, volume
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[types.LabelBackupTarget], updated.Labels[types.LabelBackupVolume] = target, volume
		var err error
		if bv, err = c.ds.UpdateBackupVolume(ctx, updated); err != nil {
			return err
		}
	}
	status := *want
	status.OwnerID = c.nodeID
	status.LastSyncedAt = bv.Status.LastSyncedAt
	status.LastModificationTime = bv.Status.LastModificationTime
	if !kit.StatusChanged(status, bv.Status) && !syncRequested(bv) {
		return nil
	}
	status.LastSyncedAt = metav1.Now()
	if !bv.Spec.SyncRequestedAt.Before(&status.LastSyncedAt) {
		// A request dated ahead (see RequestBackupVolumeSync) is
		// served.
		status.LastSyncedAt = bv.Spec.SyncRequestedAt
	}
	updated := bv.DeepCopy()
	updated.Status = status
	_, err := c.ds.UpdateBackupVolumeStatus(ctx, updated)
	return err
}

// createBackupVolume makes the BackupVolume of volume in target, under
// the first of its names (datastore.BackupVolumeObjectNames) that no
// object of another volume or target has: a volume named as another's
// hashed name leaves that one's object as it is and gets its own. Nil,
// nil when one of its names is already its object (the cache was
// behind: the next sync updates it) or every name is another's.
func (c *TargetController) createBackupVolume(ctx context.Context, target, volume string) (*longhorn.BackupVolume, error) {
	for _, name := range datastore.BackupVolumeObjectNames(volume, target) {
		created, err := c.ds.CreateBackupVolume(ctx, &longhorn.BackupVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{types.LonghornFinalizer},
				Labels: map[string]string{types.LabelBackupTarget: target, types.LabelBackupVolume: volume}},
			Spec: longhorn.BackupVolumeSpec{BackupTargetName: target, VolumeName: volume},
		})
		if !apierrors.IsAlreadyExists(err) {
			return created, err
		}
		other, err := c.ds.GetBackupVolumeFresh(ctx, name)
		if apierrors.IsNotFound(err) {
			return nil, nil // deleted meanwhile: the next sync makes it
		}
		if err != nil {
			return nil, err
		}
		if datastore.BackupVolumeTarget(other) == target && datastore.BackupVolumeVolume(other) == volume {
			return nil, nil
		}
	}
	c.Logger.WithFields(logrus.Fields{"backupTarget": target, "volume": volume, "reason": "every name it may have is another volume's"}).Warn("Backup volume not made")
	return nil, nil
}

// forgetBackupVolume deletes the BackupVolume of a volume the target no
// longer holds, labelled first so that its finalizer deletes nothing
// from the target.
func (c *TargetController) forgetBackupVolume(ctx context.Context, bv *longhorn.BackupVolume) error {
	if bv.Labels[types.LabelDeleteCustomResourceOnly] != "true" {
		updated := bv.DeepCopy()
		if updated.Labels == nil {
			updated.Labels = map[string]string{}
		}
		updated.Labels[types.LabelDeleteCustomResourceOnly] = "true"
		if _, err := c.ds.UpdateBackupVolume(ctx, updated); apierrors.IsNotFound(err) {
			return nil
		} else if err != nil {
			return fmt.Errorf("label BackupVolume %s before removing it: %w", bv.Name, err)
		}
	}
	if err := c.ds.DeleteBackupVolume(ctx, bv.Name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.Logger.WithField("backupVolume", bv.Name).Info("Backup volume no longer in the backup target: removing its object, deleting nothing from the target")
	return nil
}

// deleteBackupVolume finishes a user's deletion of a BackupVolume: every
// backup of the volume is deleted from the target, under the deletion
// lock a single backup's deletion takes, then its Backup objects, then
// the BackupVolume. A deletion that cannot run now (a backup or restore
// of the volume runs) is tried again soon; one that fails says why on
// the BackupVolume, having deleted only what it could.
func (c *TargetController) deleteBackupVolume(ctx context.Context, store *backupstore.Store, w *world, bv *longhorn.BackupVolume) (kit.Result, error) {
	// The cache may still hold a BackupVolume this controller released a
	// moment ago (its Backups' deletions bring the key back): the
	// apiserver says whether the deletion is still to be done, so that
	// the target is not locked and listed for it again.
	fresh, err := c.ds.GetBackupVolumeFresh(ctx, bv.Name)
	if apierrors.IsNotFound(err) || (err == nil && !kit.HasFinalizer(fresh)) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	volume := datastore.BackupVolumeVolume(bv)
	log := c.Logger.WithFields(logrus.Fields{"backupVolume": bv.Name, "volume": volume, "backupTarget": w.target})
	if bv.Labels[types.LabelDeleteCustomResourceOnly] != "true" {
		owner, err := c.otherOwner(w, volume)
		if err != nil {
			return kit.Result{}, err
		}
		if owner != "" {
			// Another target at this place (refused, or made so
			// before the refusal) has objects standing for these
			// backups: deleting them would delete what those objects
			// stand for, which no user asked.
			msg := fmt.Sprintf("the volume's backups are not deleted: %s stands for them too, in the same place as this target; give that target another URL, or delete it (which deletes no backups), and this deletion goes on", owner)
			log.WithFields(logrus.Fields{"owner": owner, "reason": "another target's objects stand for these backups"}).Warn("Backup volume deletion waits: " + msg)
			return kit.Result{RequeueAfter: deletionRetryPeriod}, c.noteDeletion(ctx, bv, msg)
		}
		n, err := store.DeleteVolume(volume)
		if err != nil {
			msg := fmt.Sprintf("deleting the volume's backups from the backup target failed after %d of them were deleted: %v", n, err)
			result := kit.Result{}
			if errors.Is(err, backupstore.ErrLocked) {
				msg = fmt.Sprintf("the deletion of the volume's backups waits: %v", err)
				result, err = kit.Result{RequeueAfter: deletionRetryPeriod}, nil
			}
			log.WithError(err).WithField("deleted", n).Warn("Backup volume deletion did not finish: " + msg)
			return result, errors.Join(err, c.noteDeletion(ctx, bv, msg))
		}
		log = log.WithFields(logrus.Fields{"deleted": n, "reason": "deleted by a user"})
	} else {
		log = log.WithField("reason", "gone from the backup target")
	}
	userDeletion := bv.Labels[types.LabelDeleteCustomResourceOnly] != "true"
	for _, b := range w.backupsOf(volume) {
		if !userDeletion && w.engineBackups[volume][b.Name] != nil {
			// An engine reports it running or failed: the target not
			// holding the volume says nothing of it, and a failure is
			// kept to be seen (as syncVolume keeps it). Its engine's
			// next change mirrors it again, the next backup's refresh
			// makes the BackupVolume again.
			log.WithFields(logrus.Fields{"backup": b.Name, "state": b.Status.State, "reason": "an engine reports it"}).Info("Kept the Backup object of a backup volume gone from the target")
			continue
		}
		if err := c.forget(ctx, b); err != nil {
			return kit.Result{}, err
		}
	}
	updated := bv.DeepCopy()
	kit.RemoveFinalizer(updated)
	if _, err := c.ds.UpdateBackupVolume(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return kit.Result{}, err
	}
	log.Info("Removed the backup volume")
	return kit.Result{}, nil
}

// noteDeletion says on a BackupVolume being deleted why its deletion has
// not finished.
func (c *TargetController) noteDeletion(ctx context.Context, bv *longhorn.BackupVolume, msg string) error {
	if bv.Status.Messages[BackupVolumeMessageDeletion] == msg {
		return nil
	}
	updated := bv.DeepCopy()
	if updated.Status.Messages == nil {
		updated.Status.Messages = map[string]string{}
	}
	updated.Status.Messages[BackupVolumeMessageDeletion] = msg
	if _, err := c.ds.UpdateBackupVolumeStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
