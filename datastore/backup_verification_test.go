package datastore

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func backupAt(name string, state longhorn.BackupState, mode, created string) *longhorn.Backup {
	return &longhorn.Backup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: longhorn.BackupStatus{State: state, BackupMode: mode, BackupCreatedAt: created}}
}

// reUploaded sets the bytes a backup uploaded again that its target held.
func reUploaded(b *longhorn.Backup, size string) *longhorn.Backup {
	b.Status.ReUploadedDataSize = size
	return b
}

func TestTheNewestCompletedBackupIsByItsRecordsTime(t *testing.T) {
	list := []*longhorn.Backup{
		backupAt("b-late-but-failed", longhorn.BackupStateError, "", "2026-11-26T12:00:00Z"),
		backupAt("b2", longhorn.BackupStateCompleted, "incremental", "2026-11-26T10:00:00.5Z"),
		backupAt("b1", longhorn.BackupStateCompleted, "full", "2026-11-26T10:00:00Z"),
	}
	if got := NewestCompletedBackup(list); got == nil || got.Name != "b2" {
		t.Fatalf("newest: %v", got)
	}
	if NewestCompletedBackup(list[:1]) != nil {
		t.Fatal("a failed backup counted as Completed")
	}
}

func TestAVolumeWhoseDrillFailedBacksUpFullUntilAFullBackupCompletes(t *testing.T) {
	failedAt := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	vol := func(result string) *longhorn.Volume {
		v := &longhorn.Volume{}
		if result != "" {
			v.Status.LastBackupVerification = &longhorn.BackupVerification{Backup: "b1", Result: result, VerifiedAt: metav1.NewTime(failedAt), Message: "1 of 4 blocks are bad"}
		}
		return v
	}
	before := backupAt("b1", longhorn.BackupStateCompleted, "full", "2026-11-26T09:00:00Z")
	incrementalAfter := backupAt("b2", longhorn.BackupStateCompleted, "incremental", "2026-11-26T11:00:00Z")
	fullAfter := reUploaded(backupAt("b3", longhorn.BackupStateCompleted, "full", "2026-11-26T11:00:00Z"), "1048576")
	// A backup an older manager recorded full though it reused every
	// block (the target's record of the volume's last backup missing):
	// it uploaded nothing again.
	fullInNameOnly := reUploaded(backupAt("b3", longhorn.BackupStateCompleted, "full", "2026-11-26T11:00:00Z"), "0")
	fullBeforeSizes := backupAt("b3", longhorn.BackupStateCompleted, "full", "2026-11-26T11:00:00Z")
	fullRunning := backupAt("b4", longhorn.BackupStateInProgress, "", "")
	for _, tc := range []struct {
		name    string
		v       *longhorn.Volume
		backups []*longhorn.Backup
		full    bool
	}{
		{"never drilled: as asked", vol(""), []*longhorn.Backup{before}, false},
		{"the drill passed: as asked", vol(longhorn.BackupVerificationPassed), []*longhorn.Backup{before}, false},
		{"the drill could not be made: as asked", vol(longhorn.BackupVerificationError), []*longhorn.Backup{before}, false},
		{"the drill failed: full", vol(longhorn.BackupVerificationFailed), []*longhorn.Backup{before, fullRunning}, true},
		{"an incremental backup since does not heal it: full", vol(longhorn.BackupVerificationFailed), []*longhorn.Backup{before, incrementalAfter}, true},
		{"a full backup completed since: as asked", vol(longhorn.BackupVerificationFailed), []*longhorn.Backup{before, fullAfter}, false},
		{"a backup recorded full since that uploaded no block again: full (it shared the damaged blocks)", vol(longhorn.BackupVerificationFailed), []*longhorn.Backup{before, fullInNameOnly}, true},
		{"a backup recorded full since with no sizes on record: full", vol(longhorn.BackupVerificationFailed), []*longhorn.Backup{before, fullBeforeSizes}, true},
		{"a full drill that restored the backup whole but found its filesystem corrupt: as asked (no block to heal)", func() *longhorn.Volume {
			v := vol(longhorn.BackupVerificationFailed)
			v.Status.LastBackupVerification.Full = &longhorn.BackupFullDrill{Restored: true, FilesystemCheck: longhorn.FilesystemCheckFailed}
			return v
		}(), []*longhorn.Backup{before}, false},
		{"a full drill whose restore failed: full", func() *longhorn.Volume {
			v := vol(longhorn.BackupVerificationFailed)
			v.Status.LastBackupVerification.Full = &longhorn.BackupFullDrill{}
			return v
		}(), []*longhorn.Backup{before}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, why := NextBackupFull(tc.v, tc.backups, "")
			if full != tc.full || (full && why == "") {
				t.Fatalf("full %v (%q), want %v", full, why, tc.full)
			}
		})
	}
}

// TestADamagedBackupMakesTheNextBackupFullInItsTargetOnly: a drill
// that found a backup in offsite damaged (on the Backup, or the volume's
// record of it) makes the next backup to offsite full, not the next one
// to default, and only a full backup completed in offsite since heals it.
func TestADamagedBackupMakesTheNextBackupFullInItsTargetOnly(t *testing.T) {
	failedAt := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	inTarget := func(b *longhorn.Backup, target string) *longhorn.Backup {
		b.Labels = map[string]string{types.LabelBackupTarget: target}
		return b
	}
	damaged := func() *longhorn.Backup {
		b := inTarget(backupAt("b-off", longhorn.BackupStateCompleted, "incremental", "2026-11-26T09:00:00Z"), "offsite")
		b.Status.Verification = &longhorn.BackupVerification{Result: longhorn.BackupVerificationFailed, VerifiedAt: metav1.NewTime(failedAt), Message: "offset 0 missing"}
		return b
	}
	undrilled := inTarget(backupAt("b-off", longhorn.BackupStateCompleted, "incremental", "2026-11-26T09:00:00Z"), "offsite")
	newerInDefault := backupAt("b-def", longhorn.BackupStateCompleted, "incremental", "2026-11-26T09:30:00Z")
	fullInDefault := reUploaded(backupAt("b-def-full", longhorn.BackupStateCompleted, "full", "2026-11-26T11:00:00Z"), "4096")
	fullInOffsite := reUploaded(inTarget(backupAt("b-off-full", longhorn.BackupStateCompleted, "full", "2026-11-26T11:00:00Z"), "offsite"), "4096")
	recordOf := func(backup string) *longhorn.Volume {
		v := &longhorn.Volume{}
		v.Status.LastBackupVerification = &longhorn.BackupVerification{Backup: backup, Result: longhorn.BackupVerificationFailed, VerifiedAt: metav1.NewTime(failedAt)}
		return v
	}
	for _, tc := range []struct {
		name                 string
		v                    *longhorn.Volume
		backups              []*longhorn.Backup
		toOffsite, toDefault bool
	}{
		{"offsite's backup damaged, though default holds a newer one", &longhorn.Volume{}, []*longhorn.Backup{damaged(), newerInDefault}, true, false},
		{"a full backup to default heals default only", &longhorn.Volume{}, []*longhorn.Backup{damaged(), fullInDefault}, true, false},
		{"a full backup to offsite heals it", &longhorn.Volume{}, []*longhorn.Backup{damaged(), fullInOffsite}, false, false},
		{"the volume's record of offsite's backup: offsite's next is full, default's as asked", recordOf("b-off"), []*longhorn.Backup{undrilled, newerInDefault}, true, false},
		{"the volume's record of a backup since deleted: every target's next is full", recordOf("b-gone"), []*longhorn.Backup{undrilled, newerInDefault}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if full, why := NextBackupFull(tc.v, tc.backups, "offsite"); full != tc.toOffsite || (full && !strings.Contains(why, "in backup target offsite")) {
				t.Errorf("offsite: full %v (%q), want %v", full, why, tc.toOffsite)
			}
			if full, why := NextBackupFull(tc.v, tc.backups, ""); full != tc.toDefault {
				t.Errorf("default: full %v (%q), want %v", full, why, tc.toDefault)
			}
		})
	}
}

// TestADrillIsDueUntilADrillAnswersItsRequest: a request (its time, and
// whether full) is answered only by a drill made for it or a later one,
// and a full request only by a full drill.
func TestADrillIsDueUntilADrillAnswersItsRequest(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(int64(s), 0)) }
	for _, tc := range []struct {
		name      string
		askedAt   metav1.Time
		askedFull bool
		last      *longhorn.BackupVerification
		due       bool
	}{
		{"no request: not due", metav1.Time{}, false, nil, false},
		{"asked, never drilled: due", at(10), false, nil, true},
		{"its drill made: not due", at(10), false, &longhorn.BackupVerification{RequestedAt: at(10)}, false},
		{"a new request after the drill: due", at(11), false, &longhorn.BackupVerification{RequestedAt: at(10)}, true},
		{"a full request, its full drill made: not due", at(10), true, &longhorn.BackupVerification{RequestedAt: at(10), RequestedFull: true}, false},
		{"a full request answered by a drill of the blocks alone made for the same time: due", at(10), true,
			&longhorn.BackupVerification{RequestedAt: at(10)}, true},
		{"a full request, a full drill recorded before drills said what they were asked (its findings): not due", at(10), true,
			&longhorn.BackupVerification{RequestedAt: at(10), Full: &longhorn.BackupFullDrill{Restored: true}}, false},
		{"a request of the blocks, answered by a full drill: not due", at(10), false, &longhorn.BackupVerification{RequestedAt: at(10), RequestedFull: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &longhorn.Backup{Spec: longhorn.BackupSpec{VerifyRequestedAt: tc.askedAt, VerifyFull: tc.askedFull}, Status: longhorn.BackupStatus{Verification: tc.last}}
			if got := VerifyDue(b); got != tc.due {
				t.Fatalf("VerifyDue = %v, want %v", got, tc.due)
			}
		})
	}
}
