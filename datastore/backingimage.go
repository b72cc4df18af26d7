package datastore

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetBackingImageRO returns the cached BackingImage; the caller must not
// modify it.
func (ds *DataStore) GetBackingImageRO(name string) (*longhorn.BackingImage, error) {
	return ds.backingImageLister.BackingImages(ds.namespace).Get(name)
}

// GetBackingImageFresh reads a BackingImage from the API: for a request
// that may come right after the image's creation, before the cache has it.
func (ds *DataStore) GetBackingImageFresh(ctx context.Context, name string) (*longhorn.BackingImage, error) {
	return ds.lhClient.LonghornV1beta2().BackingImages(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// ListBackingImagesRO returns every cached BackingImage.
func (ds *DataStore) ListBackingImagesRO() ([]*longhorn.BackingImage, error) {
	return ds.backingImageLister.BackingImages(ds.namespace).List(labels.Everything())
}

// CreateBackingImage creates a BackingImage.
func (ds *DataStore) CreateBackingImage(ctx context.Context, bi *longhorn.BackingImage) (*longhorn.BackingImage, error) {
	return ds.lhClient.LonghornV1beta2().BackingImages(ds.namespace).Create(ctx, bi, metav1.CreateOptions{})
}

// DeleteBackingImage deletes a BackingImage (its finalizer holds it until
// its files are gone).
func (ds *DataStore) DeleteBackingImage(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().BackingImages(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// UpdateBackingImage writes a BackingImage's spec and metadata.
func (ds *DataStore) UpdateBackingImage(ctx context.Context, bi *longhorn.BackingImage) (*longhorn.BackingImage, error) {
	return ds.lhClient.LonghornV1beta2().BackingImages(ds.namespace).Update(ctx, bi, metav1.UpdateOptions{})
}

// UpdateBackingImageStatus writes a BackingImage's status.
func (ds *DataStore) UpdateBackingImageStatus(ctx context.Context, bi *longhorn.BackingImage) (*longhorn.BackingImage, error) {
	return ds.lhClient.LonghornV1beta2().BackingImages(ds.namespace).UpdateStatus(ctx, bi, metav1.UpdateOptions{})
}

// GetBackingImageDataSourceRO returns the cached BackingImageDataSource.
func (ds *DataStore) GetBackingImageDataSourceRO(name string) (*longhorn.BackingImageDataSource, error) {
	return ds.backingImageDataSourceLister.BackingImageDataSources(ds.namespace).Get(name)
}

// CreateBackingImageDataSource creates a BackingImageDataSource.
func (ds *DataStore) CreateBackingImageDataSource(ctx context.Context, bids *longhorn.BackingImageDataSource) (*longhorn.BackingImageDataSource, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageDataSources(ds.namespace).Create(ctx, bids, metav1.CreateOptions{})
}

// UpdateBackingImageDataSource writes a data source's spec and metadata.
func (ds *DataStore) UpdateBackingImageDataSource(ctx context.Context, bids *longhorn.BackingImageDataSource) (*longhorn.BackingImageDataSource, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageDataSources(ds.namespace).Update(ctx, bids, metav1.UpdateOptions{})
}

// UpdateBackingImageDataSourceStatus writes a data source's status.
func (ds *DataStore) UpdateBackingImageDataSourceStatus(ctx context.Context, bids *longhorn.BackingImageDataSource) (*longhorn.BackingImageDataSource, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageDataSources(ds.namespace).UpdateStatus(ctx, bids, metav1.UpdateOptions{})
}

// DeleteBackingImageDataSource deletes a data source.
func (ds *DataStore) DeleteBackingImageDataSource(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().BackingImageDataSources(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// GetBackingImageManagerRO returns the cached BackingImageManager.
func (ds *DataStore) GetBackingImageManagerRO(name string) (*longhorn.BackingImageManager, error) {
	return ds.backingImageManagerLister.BackingImageManagers(ds.namespace).Get(name)
}

// ListBackingImageManagersRO returns every cached BackingImageManager.
func (ds *DataStore) ListBackingImageManagersRO() ([]*longhorn.BackingImageManager, error) {
	return ds.backingImageManagerLister.BackingImageManagers(ds.namespace).List(labels.Everything())
}

// CreateBackingImageManager creates a BackingImageManager.
func (ds *DataStore) CreateBackingImageManager(ctx context.Context, bim *longhorn.BackingImageManager) (*longhorn.BackingImageManager, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageManagers(ds.namespace).Create(ctx, bim, metav1.CreateOptions{})
}

// UpdateBackingImageManager writes a manager's spec and metadata.
func (ds *DataStore) UpdateBackingImageManager(ctx context.Context, bim *longhorn.BackingImageManager) (*longhorn.BackingImageManager, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageManagers(ds.namespace).Update(ctx, bim, metav1.UpdateOptions{})
}

// UpdateBackingImageManagerStatus writes a manager's status.
func (ds *DataStore) UpdateBackingImageManagerStatus(ctx context.Context, bim *longhorn.BackingImageManager) (*longhorn.BackingImageManager, error) {
	return ds.lhClient.LonghornV1beta2().BackingImageManagers(ds.namespace).UpdateStatus(ctx, bim, metav1.UpdateOptions{})
}

// DeleteBackingImageManagerIfUnchanged deletes a manager only at the given
// resourceVersion, so a backing image added to it meanwhile is never lost.
func (ds *DataStore) DeleteBackingImageManagerIfUnchanged(ctx context.Context, name, resourceVersion string) error {
	return ds.lhClient.LonghornV1beta2().BackingImageManagers(ds.namespace).Delete(ctx, name,
		metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &resourceVersion}})
}

// Disk is one disk of a node, found by its UUID.
type Disk struct {
	NodeID string
	Name   string
	Path   string
	UUID   string
	// Ready is the disk's Ready condition; NotReady says why it is not.
	Ready    bool
	NotReady string
}

// diskReadiness reads a disk's Ready condition.
func diskReadiness(st *longhorn.DiskStatus) (bool, string) {
	for _, c := range st.Conditions {
		if c.Type == longhorn.ConditionTypeReady {
			if c.Status == longhorn.ConditionStatusTrue {
				return true, ""
			}
			if c.Message != "" {
				return false, c.Message
			}
			return false, c.Reason
		}
	}
	return false, "its readiness is not known yet"
}

// GetDiskByUUID finds the disk whose status records the UUID, on any node.
func (ds *DataStore) GetDiskByUUID(diskUUID string) (*Disk, error) {
	nodes, err := ds.ListNodesRO()
	if err != nil {
		return nil, err
	}
	for _, node := range nodes {
		for name, st := range node.Status.DiskStatus {
			if st == nil || st.DiskUUID != diskUUID {
				continue
			}
			spec, ok := node.Spec.Disks[name]
			if !ok {
				continue
			}
			ready, why := diskReadiness(st)
			return &Disk{NodeID: node.Name, Name: name, Path: spec.Path, UUID: diskUUID, Ready: ready, NotReady: why}, nil
		}
	}
	return nil, fmt.Errorf("no node has a disk with UUID %s", diskUUID)
}

// ListNodeDisks returns the node's disks that have a UUID, by name.
func (ds *DataStore) ListNodeDisks(nodeID string) ([]Disk, error) {
	node, err := ds.GetNodeRO(nodeID)
	if err != nil {
		return nil, err
	}
	var out []Disk
	for name, spec := range node.Spec.Disks {
		if st := node.Status.DiskStatus[name]; st != nil && st.DiskUUID != "" {
			ready, why := diskReadiness(st)
			out = append(out, Disk{NodeID: nodeID, Name: name, Path: spec.Path, UUID: st.DiskUUID, Ready: ready, NotReady: why})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// VolumeTooSmallForImage says why a volume size of size bytes cannot use
// the backing image ("<size> is smaller than ..."; the caller names the
// size), or returns "": a volume must be at least as large as the disk the
// image holds, once a ready file has told that size. The API refuses such
// a volume; the volume controller stops one made before the size was known.
func VolumeTooSmallForImage(size int64, bi *longhorn.BackingImage) string {
	if bi.Status.VirtualSize > size {
		return fmt.Sprintf("%d is smaller than the virtual size %d of backing image %s: a volume must be at least as large as its image",
			size, bi.Status.VirtualSize, bi.Name)
	}
	return ""
}
