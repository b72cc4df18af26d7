package systembackup

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestThePolicyDecidesWhichVolumesAreBackedUp is the volume backup
// policy's decision for one volume, given its last backup in the default
// target and whether a drill requires its next backup full.
func TestThePolicyDecidesWhichVolumesAreBackedUp(t *testing.T) {
	created := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) string { return created.Add(d).Format(time.RFC3339Nano) }
	volume := func(change ...func(*longhorn.Volume)) *longhorn.Volume {
		v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", UID: "uid-1", CreationTimestamp: metav1.NewTime(created)}}
		for _, c := range change {
			c(v)
		}
		return v
	}
	scratch := func(v *longhorn.Volume) {
		v.Labels = map[string]string{types.LabelBackupVerifyScratch: "backup-1"}
		v.OwnerReferences = []metav1.OwnerReference{{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Backup", Name: "backup-1", UID: "b-uid"}}
	}
	// own is a backup of this very volume, taken a day after it was made.
	own := func(change ...func(*backupstore.BackupInfo)) *backupstore.BackupInfo {
		b := &backupstore.BackupInfo{Name: "backup-1", VolumeName: "vol", SnapshotCreatedAt: at(24 * time.Hour), CreatedAt: at(25 * time.Hour),
			Labels: map[string]string{types.LabelVolumeUID: "uid-1"}}
		for _, c := range change {
			c(b)
		}
		return b
	}
	const damaged = "the drill of backup backup-0 found it damaged"
	type want struct {
		use          string // the existing backup the volume is restored from
		backup, full bool
		why          string // in the reason a backup is made
	}
	for _, tc := range []struct {
		name   string
		policy string
		v      *longhorn.Volume
		last   *backupstore.BackupInfo
		full   bool
		want   want
	}{
		{"the default policy, no backup", "", volume(), nil, false, want{backup: true, why: "holds no backup"}},
		{"the default policy, its own backup", "", volume(), own(), false, want{use: "backup-1"}},
		{"if-not-present, no backup", "if-not-present", volume(), nil, false, want{backup: true, why: "holds no backup"}},
		{"if-not-present, its own backup", "if-not-present", volume(), own(), false, want{use: "backup-1"}},
		{"always, no backup", "always", volume(), nil, false, want{backup: true}},
		{"always, its own backup", "always", volume(), own(), false, want{backup: true}},
		{"disabled, no backup", "disabled", volume(), nil, false, want{}},
		{"disabled, its own backup", "disabled", volume(), own(), false, want{}},

		// Only a backup of this volume, taken after it was made, counts.
		{"another cluster's backup of a volume of the name", "if-not-present", volume(),
			own(func(b *backupstore.BackupInfo) { b.Labels[types.LabelVolumeUID] = "uid-of-another-cluster" }), false,
			want{backup: true, why: `label longhorn.io/volume-uid "uid-of-another-cluster", the volume's UID "uid-1"`}},
		{"a backup that does not say whose it is", "if-not-present", volume(),
			own(func(b *backupstore.BackupInfo) { b.Labels = nil }), false, want{backup: true, why: `label longhorn.io/volume-uid ""`}},
		{"a backup of a snapshot older than the volume", "if-not-present", volume(),
			own(func(b *backupstore.BackupInfo) { b.SnapshotCreatedAt = at(-time.Hour) }), false, want{backup: true, why: "snapshot made at"}},
		{"a backup made before the volume", "if-not-present", volume(),
			own(func(b *backupstore.BackupInfo) { b.CreatedAt = at(-time.Minute) }), false, want{backup: true, why: "backup made at"}},
		{"a backup whose times do not parse", "if-not-present", volume(),
			own(func(b *backupstore.BackupInfo) { b.SnapshotCreatedAt = "yesterday" }), false, want{backup: true, why: `"yesterday"`}},

		// After a failed drill the backup is full, as every other backup
		// of the volume; its last backup shares the damaged blocks.
		{"if-not-present, its own backup, a drill found it damaged", "if-not-present", volume(), own(), true, want{backup: true, full: true, why: damaged}},
		{"if-not-present, no backup, a drill found one damaged", "if-not-present", volume(), nil, true, want{backup: true, full: true, why: damaged}},
		{"always, a drill found one damaged", "always", volume(), own(), true, want{backup: true, full: true, why: damaged}},
		{"disabled, a drill found one damaged", "disabled", volume(), own(), true, want{}},

		// A drill's scratch volume is neither backed up nor archived.
		{"a drill's scratch volume, always", "always", volume(scratch), nil, false, want{}},
		{"a drill's scratch volume, if-not-present", "if-not-present", volume(scratch), nil, false, want{}},
		{"a volume with the scratch label alone is the user's", "if-not-present",
			volume(func(v *longhorn.Volume) { v.Labels = map[string]string{types.LabelBackupVerifyScratch: "x"} }), nil, false, want{backup: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := systembackup.ParsePolicy(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			fullWhy := ""
			if tc.full {
				fullWhy = damaged
			}
			got := decideVolume(p, tc.v, tc.last, tc.full, fullWhy)
			if got.use.name != tc.want.use || got.backup != tc.want.backup || got.full != tc.want.full || !strings.Contains(got.why, tc.want.why) {
				t.Errorf("decideVolume = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestThePolicyIsParsed(t *testing.T) {
	if _, err := systembackup.ParsePolicy("sometimes"); err == nil || !strings.Contains(err.Error(), "volumeBackupPolicy") {
		t.Errorf("systembackup.ParsePolicy(sometimes) = %v, want an error naming volumeBackupPolicy", err)
	}
	if p, _ := systembackup.ParsePolicy(""); p != longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent {
		t.Errorf("the empty policy is %q, want Longhorn's default if-not-present", p)
	}
}
