package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

var (
	backupStates = []longhorn.BackupState{longhorn.BackupStateNew, longhorn.BackupStatePending, longhorn.BackupStateInProgress,
		longhorn.BackupStateCompleted, longhorn.BackupStateError, longhorn.BackupStateUnknown}

	backupState = newDesc("longhorn_backup_state",
		"1 for the backup's state (New, Pending, InProgress, Completed, Error, Unknown), 0 for the others.", "backup", "volume", "backup_target", "state")
	backupSize = newDesc("longhorn_backup_size_bytes",
		"The bytes the backup holds on the target.", "backup", "volume", "backup_target")
	backupDuration = newDesc("longhorn_backup_duration_seconds",
		"How long a completed backup took, from its Backup object's creation to its completion; absent for backups made by another cluster.", "backup", "volume", "backup_target")
	backupThroughput = newDesc("longhorn_backup_throughput_bytes_per_second",
		"The backup's size over its duration; absent when the duration is.", "backup", "volume", "backup_target")
	targetReachable = newDesc("longhorn_backup_target_reachable",
		"1 when the last poll could read the backup target, 0 when it could not; served by the node that polls it (its BackupTarget's owner).", "backup_target")
	targetLastSuccess = newDesc("longhorn_backup_target_last_success_timestamp_seconds",
		"When a poll last read the backup target; 0 when none has since the manager started.", "backup_target")
	imageReadyCopies = newDesc("longhorn_backing_image_ready_copies",
		"Copies of the backing image ready on disks.", "backing_image")
	imageMinCopies = newDesc("longhorn_backing_image_min_copies",
		"The backing image's spec.minNumberOfCopies (1 when unset).", "backing_image")
)

// collectBackups serves the backups this node mirrors (the node polling
// a target owns its backups) and the health of the targets it polls, each
// labelled with its backup target.
func (c *Collector) collectBackups(ch chan<- prometheus.Metric) {
	if f := c.target.Load(); f != nil {
		for name, h := range (*f)() {
			if h.Polling {
				gauge(ch, targetReachable, boolValue(h.Reachable), name)
				gauge(ch, targetLastSuccess, unixSeconds(h.LastSuccess), name)
			}
		}
	}
	backups, err := c.ds.ListBackupsRO("")
	if err != nil {
		c.log.WithError(err).Warn("Cannot list backups for the metrics")
		return
	}
	c.collectVerification(ch, backups)
	for _, b := range backups {
		if b.Status.OwnerID != c.nodeID {
			continue
		}
		vol, target := datastore.BackupVolumeName(b), datastore.BackupTargetOf(b)
		for _, s := range backupStates {
			gauge(ch, backupState, boolValue(b.Status.State == s), b.Name, vol, target, string(s))
		}
		size, err := strconv.ParseInt(b.Status.Size, 10, 64)
		if err != nil {
			size = 0
		}
		gauge(ch, backupSize, float64(size), b.Name, vol, target)
		if b.Status.State != longhorn.BackupStateCompleted {
			continue
		}
		done := parseTime(b.Status.BackupCreatedAt)
		if done.IsZero() || !done.After(b.CreationTimestamp.Time) {
			continue // made elsewhere: the object came after the backup
		}
		d := done.Sub(b.CreationTimestamp.Time).Seconds()
		gauge(ch, backupDuration, d, b.Name, vol, target)
		gauge(ch, backupThroughput, float64(size)/d, b.Name, vol, target)
	}
}

func (c *Collector) collectBackingImages(ch chan<- prometheus.Metric) {
	images, err := c.ds.ListBackingImagesRO()
	if err != nil {
		c.log.WithError(err).Warn("Cannot list backing images for the metrics")
		return
	}
	for _, bi := range images {
		if bi.Status.OwnerID != c.nodeID {
			continue
		}
		ready := 0
		for _, f := range bi.Status.DiskFileStatusMap {
			if f != nil && f.State == longhorn.BackingImageStateReady {
				ready++
			}
		}
		gauge(ch, imageReadyCopies, float64(ready), bi.Name)
		// 0 or absent means 1, as the API says.
		gauge(ch, imageMinCopies, float64(max(bi.Spec.MinNumberOfCopies, 1)), bi.Name)
	}
}
