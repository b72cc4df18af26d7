package backingimage

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// ConditionTypeDeletionBlocked is true while a deleted BackingImage is kept
// because replicas use it.
const ConditionTypeDeletionBlocked = "DeletionBlocked"

// usedDisks answers the disks on which a replica uses the image.
func (c *ImageController) usedDisks(name string) (map[string]bool, error) {
	replicas, err := c.ds.ListBackingImageReplicasRO(name)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, r := range replicas {
		if r.Spec.DiskID != "" {
			used[r.Spec.DiskID] = true
		}
	}
	return used, nil
}

// cleanupWait is the backing-image-cleanup-wait-interval setting.
func (c *ImageController) cleanupWait() (time.Duration, error) {
	minutes, err := c.ds.GetSettingAsInt(types.SettingNameBackingImageCleanupWaitInterval)
	if err != nil {
		return 0, err
	}
	return time.Duration(minutes) * c.cfg.CleanupWaitUnit, nil
}

// cleanupUnusedDisks takes out of spec.disks the disks whose file no
// replica has used for the wait interval (see disksToClean); their
// managers then delete the files. It looks again when the next disk is
// due.
func (c *ImageController) cleanupUnusedDisks(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage, used map[string]bool, now time.Time) (kit.Result, error) {
	wait, err := c.cleanupWait()
	if err != nil {
		return kit.Result{}, err
	}
	remove, next := disksToClean(diskCleanupView{disks: bi.Spec.Disks, files: bi.Status.DiskFileStatusMap,
		lastRefAt: bi.Status.DiskLastRefAtMap, used: used, minCopies: bi.Spec.MinNumberOfCopies, wait: wait, now: now})
	var again kit.Result
	if !next.IsZero() {
		// Stamps have a resolution of a second: a little slack so the
		// disk is due when the sync comes.
		again.RequeueAfter = next.Sub(now) + 100*time.Millisecond
	}
	if len(remove) == 0 {
		return again, nil
	}
	bi = bi.DeepCopy()
	for _, disk := range remove {
		delete(bi.Spec.Disks, disk)
	}
	if _, err := c.ds.UpdateBackingImage(ctx, bi); err != nil {
		return again, err
	}
	msg := fmt.Sprintf("no replica used the file on disk(s) %s for the wait interval (%s): removed from spec.disks, the file is deleted",
		strings.Join(remove, ", "), wait)
	log.WithFields(logrus.Fields{"disks": remove, "wait": wait, "minNumberOfCopies": bi.Spec.MinNumberOfCopies}).Info("Cleaning up unused backing image files")
	c.event(bi, corev1.EventTypeNormal, "CleanedUp", msg)
	return again, nil
}

// holdDeletion keeps a deleted image whose file replicas use: nothing is
// deleted, the DeletionBlocked condition names the volumes, and a Warning
// event says so. It answers false once no replica uses the image.
func (c *ImageController) holdDeletion(ctx context.Context, log *logrus.Entry, bi *longhorn.BackingImage) (bool, error) {
	replicas, err := c.ds.ListBackingImageReplicasRO(bi.Name)
	if err != nil {
		return false, err
	}
	if len(replicas) == 0 {
		return false, nil
	}
	var volumes []string
	for _, r := range replicas {
		if v := r.Spec.VolumeName; v != "" && !slices.Contains(volumes, v) {
			volumes = append(volumes, v)
		}
	}
	sort.Strings(volumes)
	msg := fmt.Sprintf("backing image %s is deleted but %d replica(s) of volume(s) %s use it: its files are kept until no replica uses it",
		bi.Name, len(replicas), strings.Join(volumes, ", "))
	old := kit.GetCondition(bi.Status.Conditions, ConditionTypeDeletionBlocked)
	if old.Status == longhorn.ConditionStatusTrue && old.Message == msg {
		return true, nil
	}
	bi = bi.DeepCopy()
	bi.Status.Conditions = kit.SetCondition(bi.Status.Conditions, ConditionTypeDeletionBlocked, longhorn.ConditionStatusTrue, "InUse", msg, c.clock.Now())
	if _, err := c.ds.UpdateBackingImageStatus(ctx, bi); err != nil {
		return true, err
	}
	log.WithField("volumes", volumes).Warn("Holding the deletion of a backing image replicas use")
	c.event(bi, corev1.EventTypeWarning, "DeletionBlocked", msg)
	return true, nil
}

// event records an event when the controller has a recorder.
func (c *ImageController) event(bi *longhorn.BackingImage, eventType, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(bi, eventType, reason, msg)
	}
}
