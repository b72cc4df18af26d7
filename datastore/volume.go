package datastore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetVolumeRO returns the cached Volume; the caller must not modify it.
func (ds *DataStore) GetVolumeRO(name string) (*longhorn.Volume, error) {
	return ds.volumeLister.Volumes(ds.namespace).Get(name)
}

// ListVolumesRO returns the cached Volumes that match selector.
func (ds *DataStore) ListVolumesRO(selector labels.Selector) ([]*longhorn.Volume, error) {
	return ds.volumeLister.Volumes(ds.namespace).List(selector)
}

// GetVolumeFresh reads a Volume from the API, for read-modify-write retries.
func (ds *DataStore) GetVolumeFresh(ctx context.Context, name string) (*longhorn.Volume, error) {
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateVolume creates a Volume, applying the default-group label rule.
func (ds *DataStore) CreateVolume(ctx context.Context, v *longhorn.Volume) (*longhorn.Volume, error) {
	v.Labels, _ = FixupRecurringJobLabels(v.Labels)
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).Create(ctx, v, metav1.CreateOptions{})
}

// UpdateVolume writes a Volume's spec and metadata, applying the
// default-group label rule.
func (ds *DataStore) UpdateVolume(ctx context.Context, v *longhorn.Volume) (*longhorn.Volume, error) {
	v.Labels, _ = FixupRecurringJobLabels(v.Labels)
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).Update(ctx, v, metav1.UpdateOptions{})
}

// UpdateVolumeStatus writes a Volume's status.
func (ds *DataStore) UpdateVolumeStatus(ctx context.Context, v *longhorn.Volume) (*longhorn.Volume, error) {
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).UpdateStatus(ctx, v, metav1.UpdateOptions{})
}

// UpdateVolumeLabels re-reads the volume and applies change to its labels
// until the write does not conflict. change reports whether it changed
// anything; when nothing changed (the default-group rule included),
// nothing is written.
func (ds *DataStore) UpdateVolumeLabels(ctx context.Context, name string, change func(labels map[string]string) bool) (*longhorn.Volume, error) {
	var result *longhorn.Volume
	err := RetryOnConflict(func() error {
		v, err := ds.GetVolumeFresh(ctx, name)
		if err != nil {
			return err
		}
		if v.Labels == nil {
			v.Labels = map[string]string{}
		}
		changed := change(v.Labels)
		fixed, fixedChanged := FixupRecurringJobLabels(v.Labels)
		if !changed && !fixedChanged {
			result = v
			return nil
		}
		v.Labels = fixed
		result, err = ds.UpdateVolume(ctx, v)
		return err
	})
	return result, err
}

// DeleteVolume deletes a Volume.
func (ds *DataStore) DeleteVolume(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// DeleteVolumeUID deletes the Volume only if it is still the one of uid,
// not another made since under its name.
func (ds *DataStore) DeleteVolumeUID(ctx context.Context, name string, uid k8stypes.UID) error {
	return ds.lhClient.LonghornV1beta2().Volumes(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}
