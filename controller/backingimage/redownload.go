package backingimage

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ConditionTypeRedownload is True while the file is fetched again because
// every copy failed, False with the reason when it cannot be.
const ConditionTypeRedownload = "Redownload"

// redownloadMinInterval is the least time between two data sources of an
// image: a source whose every copy keeps failing is not fetched in a loop.
const redownloadMinInterval = 30 * time.Second

// everyCopyFailed reports whether no disk of spec.disks has a usable copy
// left and none is on its way: the first file was handed over (the data
// source is transferred), and on every disk the running manager either
// reports the file failed or lost it. It answers why, disk by disk. A
// manager that is not running, a file unknown (not verified yet), pending
// or being copied all answer false: that copy may still come.
func everyCopyFailed(v backingImageView, files map[string]*longhorn.BackingImageDiskFileStatus) (bool, string) {
	bi := v.image
	if len(bi.Spec.Disks) == 0 || v.dataSource == nil || v.dataSource.Spec.UUID != bi.Status.UUID || !v.dataSource.Spec.FileTransferred {
		return false, ""
	}
	disks := slices.Sorted(maps.Keys(bi.Spec.Disks))
	reasons := make([]string, 0, len(disks))
	for _, disk := range disks {
		bim := v.managers[disk]
		if bim == nil || bim.Status.CurrentState != longhorn.BackingImageManagerStateRunning {
			return false, ""
		}
		if st := files[disk]; st != nil && st.State == longhorn.BackingImageStateFailed {
			reasons = append(reasons, fmt.Sprintf("disk %s: %s", disk, st.Message))
			continue
		}
		if f, ok := bim.Status.BackingImageFileMap[bi.Name]; ok && f.UUID == bi.Status.UUID {
			return false, ""
		}
		reasons = append(reasons, fmt.Sprintf("disk %s: the file is gone", disk))
	}
	sort.Strings(reasons)
	return true, strings.Join(reasons, "; ")
}

// redownloadIfEveryCopyFailed fetches the file again when every copy
// failed and the source allows it: for a download or an export whose
// snapshot is still there, the transferred data source is deleted, and the
// next sync creates a new one that fetches again; the managers then take
// its file as they took the first. An uploaded file cannot be fetched
// again without the user, nor an export whose snapshot is gone: the
// Redownload condition says so. It answers true when it deleted the data
// source, and how long a new fetch must wait (the least interval between
// two) when it must. status is updated in place.
func (c *ImageController) redownloadIfEveryCopyFailed(ctx context.Context, log *logrus.Entry, v backingImageView,
	status *longhorn.BackingImageStatus, now time.Time) (redownloading bool, after time.Duration, err error) {
	bi := v.image
	failed, why := everyCopyFailed(v, status.DiskFileStatusMap)
	old := kit.GetCondition(status.Conditions, ConditionTypeRedownload)
	if !failed {
		if old.Status == longhorn.ConditionStatusTrue && anyDiskReady(status.DiskFileStatusMap) {
			status.Conditions = kit.SetCondition(status.Conditions, ConditionTypeRedownload, longhorn.ConditionStatusFalse, "Recovered",
				"a copy is ready again after the file was fetched again", now)
			log.Info("A backing image file is ready again after a new download")
		}
		return false, 0, nil
	}
	var reason, msg, again string
	switch bi.Spec.SourceType {
	case longhorn.BackingImageDataSourceTypeDownload:
		again = "downloading it again from " + bi.Spec.SourceParameters[longhorn.DataSourceParameterURL]
	case longhorn.BackingImageDataSourceTypeExportFromVolume:
		// The new data source exports the snapshot the first one took (its
		// name follows the image and its UUID); without it, an export would
		// read the volume as it is now, another content than the image's.
		volume, snap := bi.Spec.SourceParameters[longhorn.DataSourceParameterVolumeName], exportSnapshotName(v.dataSource)
		if s, err := c.ds.GetSnapshotRO(snap); err == nil && s.Spec.Volume == volume && !s.Status.MarkRemoved && s.DeletionTimestamp == nil {
			again = fmt.Sprintf("exporting snapshot %s of volume %s again", snap, volume)
			break
		}
		reason = "ExportSnapshotGone"
		msg = fmt.Sprintf("every copy of the file failed (%s), and snapshot %s of volume %s that it was exported from is gone: delete the image and export it anew",
			why, snap, volume)
	default:
		reason = "UploadCannotBeRedone"
		msg = fmt.Sprintf("every copy of the file failed (%s), and an uploaded file cannot be fetched again: delete the image and upload it again", why)
	}
	if again != "" {
		if wait := v.dataSource.CreationTimestamp.Add(redownloadMinInterval).Sub(now); wait > 0 {
			return false, wait, nil
		}
		if err := c.ds.DeleteBackingImageDataSource(ctx, bi.Name); err != nil && !apierrors.IsNotFound(err) {
			return false, 0, err
		}
		msg = fmt.Sprintf("every copy of the file failed (%s): %s", why, again)
		status.Conditions = kit.SetCondition(status.Conditions, ConditionTypeRedownload, longhorn.ConditionStatusTrue, "EveryCopyFailed", msg, now)
		log.WithField("reason", why).Warn("Every copy of the backing image file failed: fetching it again")
		c.event(bi, corev1.EventTypeWarning, "Redownload", msg)
		return true, 0, nil
	}
	if old.Status != longhorn.ConditionStatusFalse || old.Reason != reason {
		log.WithField("reason", why).Warn("Every copy of the backing image file failed, and its source cannot be fetched again")
		c.event(bi, corev1.EventTypeWarning, reason, msg)
	}
	status.Conditions = kit.SetCondition(status.Conditions, ConditionTypeRedownload, longhorn.ConditionStatusFalse, reason, msg, now)
	return false, 0, nil
}
