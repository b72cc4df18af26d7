package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

var (
	verifyResults = []string{longhorn.BackupVerificationPassed, longhorn.BackupVerificationFailed, longhorn.BackupVerificationError}

	backupVerifyResult = newDesc("longhorn_backup_verify_result",
		"1 for the result of the backup's last drill (Passed, Failed: the backup is damaged, Error: the drill could not be made), 0 for the others; absent when never drilled.", "backup", "volume", "result")
	backupVerifyDuration = newDesc("longhorn_backup_verify_duration_seconds",
		"How long the backup's last drill took.", "backup", "volume")
	backupVerifyBadBlocks = newDesc("longhorn_backup_verify_bad_blocks",
		"The bad blocks the backup's last drill found.", "backup", "volume")
	backupVerifiedAt = newDesc("longhorn_backup_last_verified_timestamp_seconds",
		"When the backup's last drill ended.", "backup", "volume")
	volumeNewestBackupVerified = newDesc("longhorn_volume_newest_backup_verified_timestamp_seconds",
		"When the volume's newest Completed backup last passed a drill (backup-verify); 0 when it never has.", "volume")
	volumeNewestBackupCreated = newDesc("longhorn_volume_newest_backup_created_timestamp_seconds",
		"When the volume's newest Completed backup was made.", "volume")
)

// collectVerification serves the drills of the backups this node mirrors:
// each backup's last drill, and per volume when its newest backup was
// last verified.
func (c *Collector) collectVerification(ch chan<- prometheus.Metric, backups []*longhorn.Backup) {
	byVolume := map[string][]*longhorn.Backup{}
	for _, b := range backups {
		if b.Status.OwnerID != c.nodeID {
			continue
		}
		vol := datastore.BackupVolumeName(b)
		byVolume[vol] = append(byVolume[vol], b)
		v := b.Status.Verification
		if v == nil {
			continue
		}
		for _, r := range verifyResults {
			gauge(ch, backupVerifyResult, boolValue(v.Result == r), b.Name, vol, r)
		}
		gauge(ch, backupVerifiedAt, unixSeconds(v.VerifiedAt.Time), b.Name, vol)
		gauge(ch, backupVerifyBadBlocks, float64(v.BadBlocks), b.Name, vol)
		if d, err := strconv.ParseFloat(v.DurationSeconds, 64); err == nil {
			gauge(ch, backupVerifyDuration, d, b.Name, vol)
		}
	}
	for vol, list := range byVolume {
		newest := datastore.NewestCompletedBackup(list)
		if newest == nil {
			continue
		}
		gauge(ch, volumeNewestBackupCreated, unixSeconds(parseTime(newest.Status.BackupCreatedAt)), vol)
		verified := 0.0
		if v := newest.Status.Verification; v != nil && v.Result == longhorn.BackupVerificationPassed {
			verified = unixSeconds(v.VerifiedAt.Time)
		}
		gauge(ch, volumeNewestBackupVerified, verified, vol)
	}
}
