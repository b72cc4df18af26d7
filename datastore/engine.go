package datastore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// EngineName is the name of a volume's engine.
func EngineName(volume string) string { return volume + "-e-0" }

// GetEngineRO returns the cached Engine; the caller must not modify it.
func (ds *DataStore) GetEngineRO(name string) (*longhorn.Engine, error) {
	return ds.engineLister.Engines(ds.namespace).Get(name)
}

// CreateEngine creates an Engine.
func (ds *DataStore) CreateEngine(ctx context.Context, e *longhorn.Engine) (*longhorn.Engine, error) {
	return ds.lhClient.LonghornV1beta2().Engines(ds.namespace).Create(ctx, e, metav1.CreateOptions{})
}

// UpdateEngine writes an Engine's spec and metadata.
func (ds *DataStore) UpdateEngine(ctx context.Context, e *longhorn.Engine) (*longhorn.Engine, error) {
	return ds.lhClient.LonghornV1beta2().Engines(ds.namespace).Update(ctx, e, metav1.UpdateOptions{})
}

// UpdateEngineStatus writes an Engine's status.
func (ds *DataStore) UpdateEngineStatus(ctx context.Context, e *longhorn.Engine) (*longhorn.Engine, error) {
	return ds.lhClient.LonghornV1beta2().Engines(ds.namespace).UpdateStatus(ctx, e, metav1.UpdateOptions{})
}

// GetReplicaRO returns the cached Replica; the caller must not modify it.
func (ds *DataStore) GetReplicaRO(name string) (*longhorn.Replica, error) {
	return ds.replicaLister.Replicas(ds.namespace).Get(name)
}

// ListVolumeReplicasRO returns the cached Replicas of a volume.
func (ds *DataStore) ListVolumeReplicasRO(volume string) ([]*longhorn.Replica, error) {
	return byVolumeIndex[*longhorn.Replica](ds.replicaIndexer, volume)
}

// ListReplicasRO returns every cached Replica.
func (ds *DataStore) ListReplicasRO() ([]*longhorn.Replica, error) {
	out := []*longhorn.Replica{}
	for _, o := range ds.replicaIndexer.List() {
		if r, ok := o.(*longhorn.Replica); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// ListBackingImageReplicasRO returns the cached Replicas that use a
// backing image as the bottom of their chain, on any disk.
func (ds *DataStore) ListBackingImageReplicasRO(backingImage string) ([]*longhorn.Replica, error) {
	objs, err := ds.replicaIndexer.ByIndex(byBackingImage, backingImage)
	if err != nil {
		return nil, err
	}
	out := make([]*longhorn.Replica, 0, len(objs))
	for _, o := range objs {
		if r, ok := o.(*longhorn.Replica); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// CreateReplica creates a Replica.
func (ds *DataStore) CreateReplica(ctx context.Context, r *longhorn.Replica) (*longhorn.Replica, error) {
	return ds.lhClient.LonghornV1beta2().Replicas(ds.namespace).Create(ctx, r, metav1.CreateOptions{})
}

// GetReplicaFresh reads a Replica from the API: one created a moment ago
// that the cache may not show yet.
func (ds *DataStore) GetReplicaFresh(ctx context.Context, name string) (*longhorn.Replica, error) {
	return ds.lhClient.LonghornV1beta2().Replicas(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// UpdateReplicaStatus writes a Replica's status.
func (ds *DataStore) UpdateReplicaStatus(ctx context.Context, r *longhorn.Replica) (*longhorn.Replica, error) {
	return ds.lhClient.LonghornV1beta2().Replicas(ds.namespace).UpdateStatus(ctx, r, metav1.UpdateOptions{})
}
