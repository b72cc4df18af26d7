package datastore

import (
	"context"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// ListBackupVolumesRO returns every cached BackupVolume.
func (ds *DataStore) ListBackupVolumesRO() ([]*longhorn.BackupVolume, error) {
	return ds.backupVolumeLister.BackupVolumes(ds.namespace).List(labels.Everything())
}

// GetBackupVolumeRO returns the cached BackupVolume.
func (ds *DataStore) GetBackupVolumeRO(name string) (*longhorn.BackupVolume, error) {
	return ds.backupVolumeLister.BackupVolumes(ds.namespace).Get(name)
}

// ListBackupsRO returns the cached Backups, of one volume when volume is set.
func (ds *DataStore) ListBackupsRO(volume string) ([]*longhorn.Backup, error) {
	selector := labels.Everything()
	if volume != "" {
		selector = labels.SelectorFromSet(labels.Set{types.LabelBackupVolume: volume})
	}
	return ds.backupLister.Backups(ds.namespace).List(selector)
}

// ListBackupsInTarget returns the cached Backups of volume in target
// ("" is default).
func (ds *DataStore) ListBackupsInTarget(target, volume string) ([]*longhorn.Backup, error) {
	all, err := ds.ListBackupsRO(volume)
	if err != nil {
		return nil, err
	}
	target = TargetName(target)
	out := all[:0:0]
	for _, b := range all {
		if BackupTargetOf(b) == target {
			out = append(out, b)
		}
	}
	return out, nil
}

// BackupVolumeName is the volume a Backup is of: its backup-volume label,
// given when the object was made and never changed (the status's
// volumeName when an older object has no label). The backup it stands
// for in the target is this volume's backup of the object's name.
func BackupVolumeName(b *longhorn.Backup) string {
	if v := b.Labels[types.LabelBackupVolume]; v != "" {
		return v
	}
	return b.Status.VolumeName
}

// GetBackupRO returns the cached Backup.
func (ds *DataStore) GetBackupRO(name string) (*longhorn.Backup, error) {
	return ds.backupLister.Backups(ds.namespace).Get(name)
}

// GetBackupFresh reads a Backup from the apiserver, not the cache.
func (ds *DataStore) GetBackupFresh(ctx context.Context, name string) (*longhorn.Backup, error) {
	return ds.lhClient.LonghornV1beta2().Backups(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateBackupVolume creates a BackupVolume.
func (ds *DataStore) CreateBackupVolume(ctx context.Context, bv *longhorn.BackupVolume) (*longhorn.BackupVolume, error) {
	return ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Create(ctx, bv, metav1.CreateOptions{})
}

// UpdateBackupVolumeStatus writes a BackupVolume's status.
func (ds *DataStore) UpdateBackupVolumeStatus(ctx context.Context, bv *longhorn.BackupVolume) (*longhorn.BackupVolume, error) {
	return ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).UpdateStatus(ctx, bv, metav1.UpdateOptions{})
}

// UpdateBackupVolume writes a BackupVolume's metadata and spec.
func (ds *DataStore) UpdateBackupVolume(ctx context.Context, bv *longhorn.BackupVolume) (*longhorn.BackupVolume, error) {
	return ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Update(ctx, bv, metav1.UpdateOptions{})
}

// DeleteBackupVolumeAndBackups is a user's deletion of a BackupVolume:
// the backup target controller deletes every backup of the volume from
// the target (its finalizer, added here first to an object made before
// BackupVolumes had one), then its Backup objects, then the object.
func (ds *DataStore) DeleteBackupVolumeAndBackups(ctx context.Context, name string) error {
	bv, err := ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !slices.Contains(bv.Finalizers, types.LonghornFinalizer) && bv.DeletionTimestamp == nil {
		bv.Finalizers = append(bv.Finalizers, types.LonghornFinalizer)
		if _, err := ds.UpdateBackupVolume(ctx, bv); err != nil {
			return err
		}
	}
	return ds.DeleteBackupVolume(ctx, name)
}

// GetBackupVolumeFresh reads a BackupVolume from the apiserver, not the
// cache.
func (ds *DataStore) GetBackupVolumeFresh(ctx context.Context, name string) (*longhorn.BackupVolume, error) {
	return ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// RequestBackupVolumeSync asks the backup target controller to read the
// volume from the target again (spec.syncRequestedAt, Longhorn's).
func (ds *DataStore) RequestBackupVolumeSync(ctx context.Context, name string) (*longhorn.BackupVolume, error) {
	bv, err := ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	// Times are kept to the second: a request in the second of the last
	// sync is dated the next, so that it is after it.
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	if !at.After(bv.Status.LastSyncedAt.Time) {
		at = metav1.NewTime(bv.Status.LastSyncedAt.Truncate(time.Second).Add(time.Second))
	}
	bv.Spec.SyncRequestedAt = at
	return ds.UpdateBackupVolume(ctx, bv)
}

// DeleteBackupVolume deletes a BackupVolume.
func (ds *DataStore) DeleteBackupVolume(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().BackupVolumes(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// CreateBackup creates a Backup.
func (ds *DataStore) CreateBackup(ctx context.Context, b *longhorn.Backup) (*longhorn.Backup, error) {
	return ds.lhClient.LonghornV1beta2().Backups(ds.namespace).Create(ctx, b, metav1.CreateOptions{})
}

// UpdateBackup writes a Backup's spec and metadata.
func (ds *DataStore) UpdateBackup(ctx context.Context, b *longhorn.Backup) (*longhorn.Backup, error) {
	return ds.lhClient.LonghornV1beta2().Backups(ds.namespace).Update(ctx, b, metav1.UpdateOptions{})
}

// UpdateBackupStatus writes a Backup's status.
func (ds *DataStore) UpdateBackupStatus(ctx context.Context, b *longhorn.Backup) (*longhorn.Backup, error) {
	return ds.lhClient.LonghornV1beta2().Backups(ds.namespace).UpdateStatus(ctx, b, metav1.UpdateOptions{})
}

// DeleteBackup deletes a Backup.
func (ds *DataStore) DeleteBackup(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().Backups(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// ListEnginesRO returns every cached Engine.
func (ds *DataStore) ListEnginesRO() ([]*longhorn.Engine, error) {
	return ds.engineLister.Engines(ds.namespace).List(labels.Everything())
}
