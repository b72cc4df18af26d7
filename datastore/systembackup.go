package datastore

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetSystemBackupRO returns the cached SystemBackup; the caller must not
// modify it.
func (ds *DataStore) GetSystemBackupRO(name string) (*longhorn.SystemBackup, error) {
	return ds.systemBackupLister.SystemBackups(ds.namespace).Get(name)
}

// GetSystemBackupFresh reads a SystemBackup from the API: for a request
// that may come right after its creation, before the cache has it.
func (ds *DataStore) GetSystemBackupFresh(ctx context.Context, name string) (*longhorn.SystemBackup, error) {
	return ds.lhClient.LonghornV1beta2().SystemBackups(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListSystemBackupsRO returns every cached SystemBackup.
func (ds *DataStore) ListSystemBackupsRO() ([]*longhorn.SystemBackup, error) {
	return ds.systemBackupLister.SystemBackups(ds.namespace).List(labels.Everything())
}

// CreateSystemBackup creates a SystemBackup.
func (ds *DataStore) CreateSystemBackup(ctx context.Context, sb *longhorn.SystemBackup) (*longhorn.SystemBackup, error) {
	return ds.lhClient.LonghornV1beta2().SystemBackups(ds.namespace).Create(ctx, sb, metav1.CreateOptions{})
}

// UpdateSystemBackup writes a SystemBackup's metadata and spec.
func (ds *DataStore) UpdateSystemBackup(ctx context.Context, sb *longhorn.SystemBackup) (*longhorn.SystemBackup, error) {
	return ds.lhClient.LonghornV1beta2().SystemBackups(ds.namespace).Update(ctx, sb, metav1.UpdateOptions{})
}

// UpdateSystemBackupStatus writes a SystemBackup's status.
func (ds *DataStore) UpdateSystemBackupStatus(ctx context.Context, sb *longhorn.SystemBackup) (*longhorn.SystemBackup, error) {
	return ds.lhClient.LonghornV1beta2().SystemBackups(ds.namespace).UpdateStatus(ctx, sb, metav1.UpdateOptions{})
}

// DeleteSystemBackup deletes a SystemBackup (its archive goes with it).
func (ds *DataStore) DeleteSystemBackup(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().SystemBackups(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// GetSystemRestoreRO returns the cached SystemRestore; the caller must
// not modify it.
func (ds *DataStore) GetSystemRestoreRO(name string) (*longhorn.SystemRestore, error) {
	return ds.systemRestoreLister.SystemRestores(ds.namespace).Get(name)
}

// GetSystemRestoreFresh reads a SystemRestore from the API: for a request
// that may come right after its creation, before the cache has it.
func (ds *DataStore) GetSystemRestoreFresh(ctx context.Context, name string) (*longhorn.SystemRestore, error) {
	return ds.lhClient.LonghornV1beta2().SystemRestores(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListSystemRestoresRO returns every cached SystemRestore.
func (ds *DataStore) ListSystemRestoresRO() ([]*longhorn.SystemRestore, error) {
	return ds.systemRestoreLister.SystemRestores(ds.namespace).List(labels.Everything())
}

// CreateSystemRestore creates a SystemRestore.
func (ds *DataStore) CreateSystemRestore(ctx context.Context, sr *longhorn.SystemRestore) (*longhorn.SystemRestore, error) {
	return ds.lhClient.LonghornV1beta2().SystemRestores(ds.namespace).Create(ctx, sr, metav1.CreateOptions{})
}

// UpdateSystemRestoreStatus writes a SystemRestore's status.
func (ds *DataStore) UpdateSystemRestoreStatus(ctx context.Context, sr *longhorn.SystemRestore) (*longhorn.SystemRestore, error) {
	return ds.lhClient.LonghornV1beta2().SystemRestores(ds.namespace).UpdateStatus(ctx, sr, metav1.UpdateOptions{})
}

// DeleteSystemRestore deletes a SystemRestore (what it restored stays).
func (ds *DataStore) DeleteSystemRestore(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().SystemRestores(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// ListPersistentVolumes lists every PersistentVolume from the API (the
// manager's ClusterRole lists them cluster-wide): what a system backup
// archives of Longhorn's volumes.
func (ds *DataStore) ListPersistentVolumes(ctx context.Context) ([]corev1.PersistentVolume, error) {
	list, err := ds.kubeClient.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// GetPersistentVolume reads a PersistentVolume from the API.
func (ds *DataStore) GetPersistentVolume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return ds.kubeClient.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// GetPersistentVolumeClaim reads a claim from the API.
func (ds *DataStore) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return ds.kubeClient.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreatePersistentVolume creates a PersistentVolume (a system restore's).
func (ds *DataStore) CreatePersistentVolume(ctx context.Context, pv *corev1.PersistentVolume) (*corev1.PersistentVolume, error) {
	return ds.kubeClient.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
}

// CreatePersistentVolumeClaim creates a claim (a system restore's).
func (ds *DataStore) CreatePersistentVolumeClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	return ds.kubeClient.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{})
}
