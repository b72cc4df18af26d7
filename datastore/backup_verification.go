package datastore

import (
	"fmt"
	"strconv"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Rules of backup drills (backup-verify) shared by the API, the recurring
// job's run and the backup verify controller. Pure functions of objects.

// NewestCompletedBackup is the Completed backup of list made last (by the
// creation time its record gives, then name), nil when none is.
func NewestCompletedBackup(list []*longhorn.Backup) *longhorn.Backup {
	var newest *longhorn.Backup
	var newestAt time.Time
	for _, b := range list {
		if b.Status.State != longhorn.BackupStateCompleted || b.DeletionTimestamp != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, b.Status.BackupCreatedAt)
		if newest == nil || at.After(newestAt) || (at.Equal(newestAt) && b.Name > newest.Name) {
			newest, newestAt = b, at
		}
	}
	return newest
}

// VerifyDue tells whether a backup's drill was asked for and not yet made.
func VerifyDue(b *longhorn.Backup) bool {
	asked := b.Spec.VerifyRequestedAt
	if asked.IsZero() {
		return false
	}
	return !VerificationAnswers(b.Status.Verification, asked.Time, b.Spec.VerifyFull)
}

// VerificationAnswers tells whether a drill's record answers the request
// made at asked, a full one when full: a drill made for that request or a
// later one, and full when a full one was asked. A drill answers only
// what it ran for: a drill of the blocks alone, running when the request
// was made full, never answers the full one. A record written before
// drills recorded what they were asked is full when it holds a full
// drill's findings.
func VerificationAnswers(v *longhorn.BackupVerification, asked time.Time, full bool) bool {
	if v == nil || v.RequestedAt.Time.Before(asked) {
		return false
	}
	return !full || v.RequestedFull || v.Full != nil
}

// NextBackupFull tells whether a volume's next backup to target must be
// full, and why: a drill found a backup of it in that target damaged (its
// blocks, or a restore that failed; not a filesystem check, which runs on
// whole blocks), and no full backup of it that uploaded blocks again
// (uploadedAgain) has completed there since. A damaged block is shared
// by every incremental backup to the same target that finds it present;
// a full backup uploads every block again, whole.
// The drills counted are each Backup's in target (status.verification)
// and the volume's record (status.lastBackupVerification) when its
// backup is in target or no longer listed (deleted since). backups are
// the volume's, in every target.
func NextBackupFull(v *longhorn.Volume, backups []*longhorn.Backup, target string) (bool, string) {
	target = TargetName(target)
	var damaged *longhorn.BackupVerification
	consider := func(rec *longhorn.BackupVerification) {
		if rec == nil || rec.Result != longhorn.BackupVerificationFailed || (rec.Full != nil && rec.Full.Restored) {
			// Not damaged; or a full drill restored every block whole and
			// found the filesystem corrupt: the data was so when backed
			// up, and uploading its blocks again heals nothing.
			return
		}
		if damaged == nil || rec.VerifiedAt.After(damaged.VerifiedAt.Time) {
			damaged = rec
		}
	}
	recordInTarget := true
	for _, b := range backups {
		if v != nil && v.Status.LastBackupVerification != nil && b.Name == v.Status.LastBackupVerification.Backup {
			recordInTarget = BackupTargetOf(b) == target
		}
		if BackupTargetOf(b) == target && b.Status.State == longhorn.BackupStateCompleted && b.Status.Verification != nil {
			rec := *b.Status.Verification
			rec.Backup = b.Name
			consider(&rec)
		}
	}
	if v != nil && recordInTarget {
		consider(v.Status.LastBackupVerification)
	}
	if damaged == nil {
		return false, ""
	}
	for _, b := range backups {
		if BackupTargetOf(b) != target || b.Status.State != longhorn.BackupStateCompleted || !uploadedAgain(b) {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, b.Status.BackupCreatedAt)
		if err == nil && at.After(damaged.VerifiedAt.Time) {
			return false, ""
		}
	}
	return true, fmt.Sprintf("the drill of backup %s in backup target %s at %s found it damaged (%s), and no full backup has completed there since",
		damaged.Backup, target, damaged.VerifiedAt.UTC().Format(time.RFC3339), damaged.Message)
}

// uploadedAgain tells whether a backup is full and uploaded again blocks
// its target held: the damaged blocks a drill found were in the target,
// so a backup that heals them is one that uploaded what was there. An
// older manager recorded full a backup that reused every block when the
// target's record of the volume's last backup was missing (it uploaded
// nothing again), and one with no sizes on record is not known to have;
// neither is taken to heal. At worst a volume whose every block is new
// makes one more full backup.
func uploadedAgain(b *longhorn.Backup) bool {
	if b.Status.BackupMode != "full" {
		return false
	}
	n, err := strconv.ParseInt(b.Status.ReUploadedDataSize, 10, 64)
	return err == nil && n > 0
}

// ParseFullDrill reads a backup-verify job's full-drill parameter: true
// or false (unset is false).
func ParseFullDrill(value string) (bool, error) {
	if value == "" {
		return false, nil
	}
	full, err := strconv.ParseBool(value)
	if err != nil || (value != "true" && value != "false") {
		return false, fmt.Errorf("must be true or false")
	}
	return full, nil
}
