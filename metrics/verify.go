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
		"When the volume's newest Completed backup in the backup target last passed a drill (backup-verify); 0 when it never has.", "volume", "backup_target")
	backupDrillRestoreSeconds = newDesc("longhorn_backup_drill_restore_seconds",
		"How long the backup's last full drill took to restore it into a scratch volume: evidence for a recovery-time objective.", "backup", "volume")
	backupDrillRestored = newDesc("longhorn_backup_drill_restored",
		"1 when the backup's last full drill restored it (its digest matched end to end), 0 when it did not; absent when never fully drilled.", "backup", "volume")
	backupDrillFilesystemCheck = newDesc("longhorn_backup_drill_filesystem_check",
		"1 for the result of the filesystem check of the backup's last full drill (Passed, Failed: the restored filesystem is corrupt, or lost where an earlier drill found one, Skipped: none found ever, Error: the check could not run), 0 for the others.", "backup", "volume", "result")
	volumeNewestBackupCreated = newDesc("longhorn_volume_newest_backup_created_timestamp_seconds",
		"When the volume's newest Completed backup in the backup target was made.", "volume", "backup_target")
)

// collectVerification serves the drills of the backups this node mirrors:
// each backup's last drill, and per volume and target when its newest
// backup there was last verified (a backup-verify job drills each
// target's).
func (c *Collector) collectVerification(ch chan<- prometheus.Metric, backups []*longhorn.Backup) {
	type volumeIn struct{ volume, target string }
	byVolume := map[volumeIn][]*longhorn.Backup{}
	for _, b := range backups {
		if b.Status.OwnerID != c.nodeID {
			continue
		}
		vol := datastore.BackupVolumeName(b)
		in := volumeIn{vol, datastore.BackupTargetOf(b)}
		byVolume[in] = append(byVolume[in], b)
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
		if f := v.Full; f != nil {
			c.collectFullDrill(ch, f, v.Result, b.Name, vol)
		}
	}
	for in, list := range byVolume {
		newest := datastore.NewestCompletedBackup(list)
		if newest == nil {
			continue
		}
		gauge(ch, volumeNewestBackupCreated, unixSeconds(parseTime(newest.Status.BackupCreatedAt)), in.volume, in.target)
		verified := 0.0
		if v := newest.Status.Verification; v != nil && v.Result == longhorn.BackupVerificationPassed {
			verified = unixSeconds(v.VerifiedAt.Time)
		}
		gauge(ch, volumeNewestBackupVerified, verified, in.volume, in.target)
	}
}

var filesystemCheckResults = []string{longhorn.FilesystemCheckPassed, longhorn.FilesystemCheckFailed, longhorn.FilesystemCheckSkipped, longhorn.FilesystemCheckError}

// collectFullDrill serves what a backup's last full drill found.
// A restore that did not end (a timeout: the drill's Error) says nothing
// of the backup: restored is then absent.
func (c *Collector) collectFullDrill(ch chan<- prometheus.Metric, f *longhorn.BackupFullDrill, result, backup, vol string) {
	if f.Restored || result == longhorn.BackupVerificationFailed {
		gauge(ch, backupDrillRestored, boolValue(f.Restored), backup, vol)
	}
	if d, err := strconv.ParseFloat(f.RestoreSeconds, 64); err == nil {
		gauge(ch, backupDrillRestoreSeconds, d, backup, vol)
	}
	if f.FilesystemCheck == "" {
		return
	}
	for _, r := range filesystemCheckResults {
		gauge(ch, backupDrillFilesystemCheck, boolValue(f.FilesystemCheck == r), backup, vol, r)
	}
}
