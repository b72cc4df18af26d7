package volume

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ConditionTypeWaitForBackingImage is true while a volume's replicas wait
// for its backing image's file on their disks, as in Longhorn.
const ConditionTypeWaitForBackingImage = "WaitForBackingImage"

// backingImageHandler re-enqueues the volumes whose replicas use a
// backing image when it changes: a file becoming ready on a disk lets
// them start.
func (c *Controller) backingImageHandler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		bi, ok := obj.(*longhorn.BackingImage)
		if !ok {
			return
		}
		replicas, err := c.ds.ListBackingImageReplicasRO(bi.Name)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, r := range replicas {
			if v := r.Spec.VolumeName; v != "" && !seen[v] {
				seen[v] = true
				c.EnqueueVolume(v)
			}
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

// backingFiles returns, for a volume on a backing image, the file each
// replica opens on its disk. It asks for the files it lacks (the disks
// join the image's spec.disks) and, until every one is ready, returns
// why the volume waits instead.
func (c *Controller) backingFiles(ctx context.Context, v *longhorn.Volume, replicas []*longhorn.Replica) (map[string]*replica.BackingFile, string, error) {
	if v.Spec.BackingImage == "" {
		return nil, "", nil
	}
	bi, err := c.ds.GetBackingImageRO(v.Spec.BackingImage)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Sprintf("backing image %s does not exist", v.Spec.BackingImage), nil
	}
	if err != nil {
		return nil, "", err
	}
	if bi.Status.UUID == "" {
		return nil, fmt.Sprintf("backing image %s is not initialized yet", bi.Name), nil
	}
	if reason := imageUnfitForVolume(v, bi); reason != "" {
		return nil, reason, nil
	}
	if err := c.requestBackingFiles(ctx, bi, replicas); err != nil {
		return nil, "", err
	}
	files := map[string]*replica.BackingFile{}
	var waiting []string
	for _, r := range replicas {
		file, w := datastore.ReplicaBackingFile(bi, r)
		if file == nil {
			waiting = append(waiting, w)
			continue
		}
		files[r.Name] = file
	}
	if len(waiting) > 0 {
		sort.Strings(waiting)
		return nil, fmt.Sprintf("backing image %s: %s", bi.Name, strings.Join(waiting, "; ")), nil
	}
	return files, "", nil
}

// imageUnfitForVolume says why a volume cannot start on its image, or
// returns "": the volume is smaller than the disk the image holds, or the
// image's ready file is not a disk image replicas can open (a qcow2 image
// with a backing file of its own, encrypted, corrupt): its manager then
// reports no virtual size, and the reason in the file's message. Both are
// known once a file is ready.
func imageUnfitForVolume(v *longhorn.Volume, bi *longhorn.BackingImage) string {
	if why := datastore.VolumeTooSmallForImage(v.Spec.Size, bi); why != "" {
		return "volume size " + why
	}
	if bi.Status.VirtualSize > 0 || bi.Status.Size == 0 {
		return ""
	}
	disks := make([]string, 0, len(bi.Status.DiskFileStatusMap))
	for disk := range bi.Status.DiskFileStatusMap {
		disks = append(disks, disk)
	}
	sort.Strings(disks)
	for _, disk := range disks {
		if st := bi.Status.DiskFileStatusMap[disk]; st != nil && st.State == longhorn.BackingImageStateReady {
			return fmt.Sprintf("backing image %s is not a disk image volumes can use: %s", bi.Name, st.Message)
		}
	}
	return ""
}

// requestBackingFiles adds the disks of the volume's replicas to the
// image's spec.disks, so that a file is kept on each.
func (c *Controller) requestBackingFiles(ctx context.Context, bi *longhorn.BackingImage, replicas []*longhorn.Replica) error {
	var missing []string
	for _, r := range replicas {
		if _, ok := bi.Spec.Disks[r.Spec.DiskID]; !ok && r.Spec.DiskID != "" && !slices.Contains(missing, r.Spec.DiskID) {
			missing = append(missing, r.Spec.DiskID)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if bi.DeletionTimestamp != nil {
		return fmt.Errorf("backing image %s is being deleted: no new disk gets its file", bi.Name)
	}
	updated := bi.DeepCopy()
	if updated.Spec.Disks == nil {
		updated.Spec.Disks = map[string]string{}
	}
	for _, d := range missing {
		updated.Spec.Disks[d] = ""
	}
	if _, err := c.ds.UpdateBackingImage(ctx, updated); err != nil {
		return fmt.Errorf("ask backing image %s for a file on disks %v: %w", bi.Name, missing, err)
	}
	c.Logger.WithFields(logrus.Fields{"backingImage": bi.Name, "disks": missing}).Info("Asked for the backing image's file on the disks of the volume's replicas")
	return nil
}

// checkRestoreBackingImage refuses to restore a backup onto a volume
// whose backing image is not the one the backup was taken on: the backup
// holds only what the layers held, and reads the rest from that image.
func (c *Controller) checkRestoreBackingImage(v *longhorn.Volume, info *backupstore.BackupInfo) error {
	switch {
	case info.BackingImageName == "" && v.Spec.BackingImage == "":
		return nil
	case info.BackingImageName == "":
		return fmt.Errorf("backup %s was taken of a volume without a backing image: restore it into a volume without backingImage (this one has %s)", info.Name, v.Spec.BackingImage)
	case v.Spec.BackingImage != info.BackingImageName:
		return fmt.Errorf("backup %s was taken of a volume on backing image %s: restore it into a volume with backingImage %s", info.Name, info.BackingImageName, info.BackingImageName)
	}
	bi, err := c.ds.GetBackingImageRO(v.Spec.BackingImage)
	if err != nil {
		return fmt.Errorf("backing image %s of backup %s: %w", v.Spec.BackingImage, info.Name, err)
	}
	if info.BackingImageChecksum != "" && bi.Status.Checksum != info.BackingImageChecksum {
		return fmt.Errorf("backing image %s has checksum %s, but backup %s was taken on one with checksum %s: not the same image",
			bi.Name, bi.Status.Checksum, info.Name, info.BackingImageChecksum)
	}
	return nil
}
