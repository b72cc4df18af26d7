package datastore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetSnapshotRO returns the cached Snapshot; the caller must not modify it.
func (ds *DataStore) GetSnapshotRO(name string) (*longhorn.Snapshot, error) {
	return ds.snapshotLister.Snapshots(ds.namespace).Get(name)
}

// ListVolumeSnapshotsRO returns the cached Snapshots of a volume.
func (ds *DataStore) ListVolumeSnapshotsRO(volume string) ([]*longhorn.Snapshot, error) {
	return byVolumeIndex[*longhorn.Snapshot](ds.snapshotIndexer, volume)
}

// GetSnapshotFresh reads a Snapshot from the API: for a request that may
// come right after the object's creation, before the cache has it.
func (ds *DataStore) GetSnapshotFresh(ctx context.Context, name string) (*longhorn.Snapshot, error) {
	return ds.lhClient.LonghornV1beta2().Snapshots(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateSnapshot creates a Snapshot object.
func (ds *DataStore) CreateSnapshot(ctx context.Context, s *longhorn.Snapshot) (*longhorn.Snapshot, error) {
	return ds.lhClient.LonghornV1beta2().Snapshots(ds.namespace).Create(ctx, s, metav1.CreateOptions{})
}

// UpdateSnapshot writes a Snapshot's spec and metadata.
func (ds *DataStore) UpdateSnapshot(ctx context.Context, s *longhorn.Snapshot) (*longhorn.Snapshot, error) {
	return ds.lhClient.LonghornV1beta2().Snapshots(ds.namespace).Update(ctx, s, metav1.UpdateOptions{})
}

// UpdateSnapshotStatus writes a Snapshot's status.
func (ds *DataStore) UpdateSnapshotStatus(ctx context.Context, s *longhorn.Snapshot) (*longhorn.Snapshot, error) {
	return ds.lhClient.LonghornV1beta2().Snapshots(ds.namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
}

// DeleteSnapshot deletes a Snapshot object.
func (ds *DataStore) DeleteSnapshot(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().Snapshots(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
