// Package datastore is the manager's view of the cluster: reads come from
// shared-informer listers, writes go through the clientsets. It is split
// into one file per resource; nothing here keeps state of its own.
package datastore

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	lhinformers "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/informers/externalversions"
	lhlisters "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/listers/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// DataStore reads Longhorn and Kubernetes objects of one namespace from the
// informer caches and writes them through the API.
type DataStore struct {
	namespace string

	lhClient   lhclientset.Interface
	kubeClient kubernetes.Interface

	settingLister       lhlisters.SettingLister
	nodeLister          lhlisters.NodeLister
	volumeLister        lhlisters.VolumeLister
	engineLister        lhlisters.EngineLister
	replicaLister       lhlisters.ReplicaLister
	snapshotLister      lhlisters.SnapshotLister
	backupLister        lhlisters.BackupLister
	backupVolumeLister  lhlisters.BackupVolumeLister
	backupTargetLister  lhlisters.BackupTargetLister
	recurringJobLister  lhlisters.RecurringJobLister
	systemBackupLister  lhlisters.SystemBackupLister
	systemRestoreLister lhlisters.SystemRestoreLister

	backingImageLister           lhlisters.BackingImageLister
	backingImageDataSourceLister lhlisters.BackingImageDataSourceLister
	backingImageManagerLister    lhlisters.BackingImageManagerLister
	instanceManagerLister        lhlisters.InstanceManagerLister
	leaseLister                  coordinationlisters.LeaseLister
	cronJobLister                batchlisters.CronJobLister

	synced []cache.InformerSynced

	// replicaIndexer and snapshotIndexer find a volume's objects by its
	// label without a scan of every object (30,000 snapshots at scale).
	replicaIndexer  cache.Indexer
	snapshotIndexer cache.Indexer
}

// byVolume names the informer index of objects by their volume label.
const byVolume = "longhorn-volume"

// byBackingImage names the informer index of Replicas by the backing
// image they use.
const byBackingImage = "longhorn-backing-image"

func replicaBackingImageIndex(obj any) ([]string, error) {
	if r, ok := obj.(*longhorn.Replica); ok && r.Spec.BackingImage != "" {
		return []string{r.Spec.BackingImage}, nil
	}
	return nil, nil
}

func volumeLabelIndex(obj any) ([]string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if v := m.GetLabels()[types.LabelVolume]; v != "" {
		return []string{v}, nil
	}
	return nil, nil
}

// byVolumeIndex lists the objects of an informer's index by volume.
func byVolumeIndex[T any](indexer cache.Indexer, volume string) ([]T, error) {
	objs, err := indexer.ByIndex(byVolume, volume)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Informers are the shared informer factories the datastore reads from.
// Controllers register their event handlers on the same factories.
type Informers struct {
	Longhorn lhinformers.SharedInformerFactory
	Kube     informers.SharedInformerFactory
	// Cluster watches every namespace, for the PersistentVolumes and
	// claims of Longhorn volumes (controller/pvc); no informer of it
	// starts unless one is asked for.
	Cluster informers.SharedInformerFactory
}

// NewInformers makes factories scoped to the manager's namespace.
func NewInformers(lhClient lhclientset.Interface, kubeClient kubernetes.Interface, namespace string, resync time.Duration) Informers {
	return Informers{
		// Snapshots are many (30 per volume is common) and follow their
		// engine's status: no periodic resync of them. Nor of recurring
		// jobs (10,000 is a size users run): their controller sweeps its
		// cache for the few a resync would bring back
		// (controller/recurringjob/resync.go).
		Longhorn: lhinformers.NewSharedInformerFactoryWithOptions(lhClient, resync, lhinformers.WithNamespace(namespace),
			lhinformers.WithCustomResyncConfig(map[metav1.Object]time.Duration{&longhorn.Snapshot{}: 0, &longhorn.RecurringJob{}: 0}),
			lhinformers.WithTransform(cacheTransform)),
		Kube: informers.NewSharedInformerFactoryWithOptions(kubeClient, resync, informers.WithNamespace(namespace),
			informers.WithTransform(cacheTransform)),
		Cluster: informers.NewSharedInformerFactoryWithOptions(kubeClient, resync, informers.WithTransform(cacheTransform)),
	}
}

// Start starts every informer requested so far.
func (i Informers) Start(stop <-chan struct{}) {
	i.Longhorn.Start(stop)
	i.Kube.Start(stop)
	i.Cluster.Start(stop)
}

// Shutdown stops the informers and waits for their goroutines.
func (i Informers) Shutdown() {
	i.Longhorn.Shutdown()
	i.Kube.Shutdown()
	i.Cluster.Shutdown()
}

// New wires a datastore to the informers' listers.
func New(namespace string, lhClient lhclientset.Interface, kubeClient kubernetes.Interface, inf Informers) *DataStore {
	lh := inf.Longhorn.Longhorn().V1beta2()
	ds := &DataStore{
		namespace:           namespace,
		lhClient:            lhClient,
		kubeClient:          kubeClient,
		settingLister:       lh.Settings().Lister(),
		nodeLister:          lh.Nodes().Lister(),
		volumeLister:        lh.Volumes().Lister(),
		engineLister:        lh.Engines().Lister(),
		replicaLister:       lh.Replicas().Lister(),
		snapshotLister:      lh.Snapshots().Lister(),
		backupLister:        lh.Backups().Lister(),
		backupVolumeLister:  lh.BackupVolumes().Lister(),
		backupTargetLister:  lh.BackupTargets().Lister(),
		recurringJobLister:  lh.RecurringJobs().Lister(),
		systemBackupLister:  lh.SystemBackups().Lister(),
		systemRestoreLister: lh.SystemRestores().Lister(),

		backingImageLister:           lh.BackingImages().Lister(),
		backingImageDataSourceLister: lh.BackingImageDataSources().Lister(),
		backingImageManagerLister:    lh.BackingImageManagers().Lister(),
		instanceManagerLister:        lh.InstanceManagers().Lister(),
		leaseLister:                  inf.Kube.Coordination().V1().Leases().Lister(),
		cronJobLister:                inf.Kube.Batch().V1().CronJobs().Lister(),
	}
	for _, informer := range []cache.SharedIndexInformer{lh.Replicas().Informer(), lh.Snapshots().Informer()} {
		// Only fails once the informer started; New runs before.
		_ = informer.AddIndexers(cache.Indexers{byVolume: volumeLabelIndex})
	}
	_ = lh.Replicas().Informer().AddIndexers(cache.Indexers{byBackingImage: replicaBackingImageIndex})
	ds.replicaIndexer = lh.Replicas().Informer().GetIndexer()
	ds.snapshotIndexer = lh.Snapshots().Informer().GetIndexer()
	ds.synced = []cache.InformerSynced{
		lh.Settings().Informer().HasSynced,
		lh.Nodes().Informer().HasSynced,
		lh.Volumes().Informer().HasSynced,
		lh.Engines().Informer().HasSynced,
		lh.Replicas().Informer().HasSynced,
		lh.Snapshots().Informer().HasSynced,
		lh.Backups().Informer().HasSynced,
		lh.BackupVolumes().Informer().HasSynced,
		lh.BackupTargets().Informer().HasSynced,
		lh.RecurringJobs().Informer().HasSynced,
		lh.SystemBackups().Informer().HasSynced,
		lh.SystemRestores().Informer().HasSynced,
		lh.BackingImages().Informer().HasSynced,
		lh.BackingImageDataSources().Informer().HasSynced,
		lh.BackingImageManagers().Informer().HasSynced,
		lh.InstanceManagers().Informer().HasSynced,
		inf.Kube.Coordination().V1().Leases().Informer().HasSynced,
		inf.Kube.Batch().V1().CronJobs().Informer().HasSynced,
	}
	return ds
}

// Namespace is the namespace the manager works in.
func (ds *DataStore) Namespace() string { return ds.namespace }

// WaitForCacheSync blocks until every informer has listed once.
func (ds *DataStore) WaitForCacheSync(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), ds.synced...) {
		return fmt.Errorf("informer caches did not sync: %w", context.Cause(ctx))
	}
	return nil
}
