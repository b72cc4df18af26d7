package backupverify

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestScratchVolumeIsOneReplicaLabelledOwnedAndSelectsNoJob(t *testing.T) {
	b := backupObj("b-new", "2026-11-26T09:00:00Z", func(b *longhorn.Backup) {
		b.UID, b.Status.VolumeSize, b.Status.URL = "uid-1", "16777216", "file:///t?backup=b-new&volume=vol"
	})
	v, err := scratchVolume(b, ScratchVolumeName(b.Name), "node-1")
	if err != nil {
		t.Fatal(err)
	}
	if v.Spec.NumberOfReplicas != 1 || v.Spec.Size != 16<<20 || v.Spec.FromBackup != b.Status.URL || v.Spec.NodeID != "" {
		t.Fatalf("spec %+v", v.Spec)
	}
	if v.Labels[types.LabelBackupVerifyScratch] != "b-new" || v.Labels[types.LabelBackupVerifyNode] != "node-1" || v.Annotations[types.AnnotationSelectedNode] != "node-1" {
		t.Fatalf("labels %v", v.Labels)
	}
	if len(v.OwnerReferences) != 1 || v.OwnerReferences[0].Kind != "Backup" || v.OwnerReferences[0].UID != "uid-1" {
		t.Fatalf("owners %+v", v.OwnerReferences)
	}
	if ScratchVolumeName("b-new") != v.Name || !strings.HasPrefix(v.Name, "drill-") || ScratchVolumeName("b-old") == v.Name {
		t.Fatalf("name %s", v.Name)
	}
	if _, err := scratchVolume(backupObj("b", ""), "drill-x", "node-1"); err == nil {
		t.Fatal("a backup with no size made a scratch volume")
	}
}

func TestRestoreState(t *testing.T) {
	cond := func(status longhorn.ConditionStatus, reason, msg string) []longhorn.Condition {
		return []longhorn.Condition{{Type: conditionRestore, Status: status, Reason: reason, Message: msg}}
	}
	for _, tc := range []struct {
		name   string
		status longhorn.VolumeStatus
		done   bool
		failed string
	}{
		{"not begun", longhorn.VolumeStatus{RestoreRequired: true}, false, ""},
		{"restoring", longhorn.VolumeStatus{RestoreRequired: true, RestoreInitiated: true, Conditions: cond(longhorn.ConditionStatusFalse, "Restoring", "50%")}, false, ""},
		{"restored", longhorn.VolumeStatus{RestoreInitiated: true, Conditions: cond(longhorn.ConditionStatusTrue, "Restored", "")}, true, ""},
		{"a digest mismatch fails it, with the restore's message", longhorn.VolumeStatus{RestoreRequired: true, RestoreInitiated: true,
			Conditions: cond(longhorn.ConditionStatusFalse, reasonRestoreFailed, "its block list gives the digest sha256:1, not sha256:2")}, true, "its block list gives the digest sha256:1, not sha256:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, failed := restoreState(&longhorn.Volume{Status: tc.status})
			if done != tc.done || failed != tc.failed {
				t.Fatalf("restoreState = %v, %q", done, failed)
			}
		})
	}
}

func TestSweepScratch(t *testing.T) {
	now := metav1.Now()
	vol := func(name string, labels map[string]string, deleting bool) *longhorn.Volume {
		v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if types.IsBackupVerifyScratch(labels) {
			v.OwnerReferences = backupOwner
		}
		if deleting {
			v.DeletionTimestamp = &now
		}
		return v
	}
	scratch := func(node string) map[string]string {
		return map[string]string{types.LabelBackupVerifyScratch: "b1", types.LabelBackupVerifyNode: node}
	}
	labelledByAUser := vol("drill-e", scratch("node-1"), false)
	labelledByAUser.OwnerReferences = nil
	ready := func(node string) bool { return node == "node-2" }
	for _, tc := range []struct {
		name  string
		v     *longhorn.Volume
		sweep bool
	}{
		{"a user's volume is never deleted", vol("db", map[string]string{"app": "db"}, false), false},
		{"a volume named like a scratch volume but unlabelled is never deleted", vol("drill-0123456789ab", nil, false), false},
		{"this node's scratch volume no drill runs on is deleted", vol("drill-a", scratch("node-1"), false), true},
		{"the scratch volume of the drill running stays", vol("drill-active", scratch("node-1"), false), false},
		{"a scratch volume of a Ready node's drill stays", vol("drill-b", scratch("node-2"), false), false},
		{"a scratch volume of a node gone is deleted", vol("drill-c", scratch("node-9"), false), true},
		{"one being deleted is left to its deletion", vol("drill-d", scratch("node-1"), true), false},
		{"a volume a user labelled as a scratch volume, no Backup's, is never deleted", labelledByAUser, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sweepScratch(tc.v, "drill-active", "node-1", ready); got != tc.sweep {
				t.Fatalf("sweepScratch = %v", got)
			}
		})
	}
}

func TestWithFullDrill(t *testing.T) {
	blocks := longhorn.BackupVerification{Result: longhorn.BackupVerificationPassed, Digest: "matched", BlocksRead: 8}
	for _, tc := range []struct {
		name    string
		full    *longhorn.BackupFullDrill
		restore string // a restore failure; "" when it restored
		// seen: an earlier drill of the volume's backups that found a
		// filesystem; nil when none did.
		seen    *filesystemSeen
		result  string
		message string
		check   string // the filesystem check recorded; "" for as given
	}{
		{"a clean ext4 filesystem passes", &longhorn.BackupFullDrill{Restored: true, Filesystem: "ext4", FilesystemCheck: longhorn.FilesystemCheckPassed}, "", nil,
			longhorn.BackupVerificationPassed, "", ""},
		{"no filesystem, and no drill of the volume's backups found one (a raw block volume): the restore alone passes, saying so",
			&longhorn.BackupFullDrill{Restored: true, Filesystem: "none", FilesystemCheck: longhorn.FilesystemCheckSkipped}, "", nil,
			longhorn.BackupVerificationPassed, "taken for a raw block volume, the restore alone is checked", longhorn.FilesystemCheckSkipped},
		{"no filesystem where an earlier drill found ext4 (its superblock zeroed): Failed, the check Failed, naming that drill",
			&longhorn.BackupFullDrill{Restored: true, Filesystem: "none", FilesystemCheck: longhorn.FilesystemCheckSkipped}, "",
			&filesystemSeen{filesystem: "ext4", backup: "b-old", at: time.Date(2026, 11, 20, 4, 0, 0, 0, time.UTC)},
			longhorn.BackupVerificationFailed, "the restored filesystem is lost: no filesystem the drill knows (ext4, xfs) at the start of the restored data, though the drill of backup b-old at 2026-11-20T04:00:00Z found ext4",
			longhorn.FilesystemCheckFailed},
		{"ext4 found and clean, whatever an earlier drill found: passes", &longhorn.BackupFullDrill{Restored: true, Filesystem: "ext4", FilesystemCheck: longhorn.FilesystemCheckPassed}, "",
			&filesystemSeen{filesystem: "xfs", backup: "b-old"}, longhorn.BackupVerificationPassed, "", longhorn.FilesystemCheckPassed},
		{"a corrupt filesystem fails the drill, saying the check's output", &longhorn.BackupFullDrill{Restored: true, Filesystem: "ext4",
			FilesystemCheck: longhorn.FilesystemCheckFailed, FilesystemCheckOutput: "e2fsck -n -f /dev/loop3: exit 4"}, "", nil,
			longhorn.BackupVerificationFailed, "the restored ext4 filesystem is corrupt: e2fsck -n -f /dev/loop3: exit 4", ""},
		{"a check that could not run is an Error", &longhorn.BackupFullDrill{Restored: true, Filesystem: "xfs", FilesystemCheck: longhorn.FilesystemCheckError}, "", nil,
			longhorn.BackupVerificationError, "the xfs check could not be made", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lostFilesystem(tc.full, tc.seen)
			result, msg := fullDrillResult(tc.full)
			rec := withFullDrill(blocks, tc.full, result, msg)
			if rec.Result != tc.result || !strings.Contains(rec.Message, tc.message) || rec.Full != tc.full || rec.BlocksRead != 8 {
				t.Fatalf("got %+v", rec)
			}
			if tc.check != "" && rec.Full.FilesystemCheck != tc.check {
				t.Fatalf("filesystem check %q, want %q", rec.Full.FilesystemCheck, tc.check)
			}
		})
	}
	failed := withFullDrill(blocks, &longhorn.BackupFullDrill{}, longhorn.BackupVerificationFailed, "full drill: the backup did not restore: digest")
	if failed.Result != longhorn.BackupVerificationFailed || !strings.HasPrefix(failed.Message, "full drill: the backup did not restore") {
		t.Fatalf("a restore that failed: %+v", failed)
	}
}

// backupOwner is the owner reference a scratch volume carries: its Backup.
var backupOwner = []metav1.OwnerReference{{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Backup", Name: "b1", UID: "uid-b1"}}

// TestLastFilesystemSeen: what tells a full drill the volume held a
// filesystem: the latest drill of its backups (any target, on each
// Backup or the volume's record) that found ext4 or xfs.
func TestLastFilesystemSeen(t *testing.T) {
	at := func(day int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, day, 4, 0, 0, 0, time.UTC)) }
	drilled := func(name, fs string, day int) *longhorn.Backup {
		return backupObj(name, "", func(b *longhorn.Backup) {
			b.Status.Verification = &longhorn.BackupVerification{VerifiedAt: at(day), Result: longhorn.BackupVerificationPassed}
			if fs != "" {
				b.Status.Verification.Full = &longhorn.BackupFullDrill{Restored: true, Filesystem: fs}
			}
		})
	}
	record := &longhorn.Volume{Status: longhorn.VolumeStatus{LastBackupVerification: &longhorn.BackupVerification{Backup: "b-gone", VerifiedAt: at(25),
		Full: &longhorn.BackupFullDrill{Restored: true, Filesystem: "xfs"}}}}
	for _, tc := range []struct {
		name    string
		v       *longhorn.Volume
		backups []*longhorn.Backup
		want    string // "filesystem backup"; "" for none
	}{
		{"never drilled", nil, []*longhorn.Backup{backupObj("b1", "")}, ""},
		{"drills of the blocks alone say nothing of a filesystem", nil, []*longhorn.Backup{drilled("b1", "", 20)}, ""},
		{"full drills that found none", nil, []*longhorn.Backup{drilled("b1", "none", 20)}, ""},
		{"a full drill that found ext4", nil, []*longhorn.Backup{drilled("b1", "none", 22), drilled("b2", "ext4", 21)}, "ext4 b2"},
		{"the latest of several", nil, []*longhorn.Backup{drilled("b1", "ext4", 20), drilled("b2", "xfs", 23)}, "xfs b2"},
		{"the volume's record of a backup since deleted", record, []*longhorn.Backup{drilled("b1", "ext4", 20)}, "xfs b-gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if seen := lastFilesystemSeen(tc.v, tc.backups); seen != nil {
				got = seen.filesystem + " " + seen.backup
			}
			if got != tc.want {
				t.Fatalf("seen %q, want %q", got, tc.want)
			}
		})
	}
}
