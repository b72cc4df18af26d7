package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestDrillMetrics: each drilled backup serves its last drill; a volume
// serves, per backup target, when its newest Completed backup there last
// passed one (0 while its
// newest backup failed or was never drilled), and when that backup was
// made; another node's backups are not served.
func TestDrillMetrics(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	backup := func(name, volume, owner, created string, v *longhorn.BackupVerification) *longhorn.Backup {
		return &longhorn.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{types.LabelBackupVolume: volume}},
			Status: longhorn.BackupStatus{OwnerID: owner, State: longhorn.BackupStateCompleted, BackupCreatedAt: created, Verification: v}}
	}
	passed := &longhorn.BackupVerification{Result: longhorn.BackupVerificationPassed, VerifiedAt: metav1.NewTime(now.Add(-time.Hour)), DurationSeconds: "2.500"}
	failed := &longhorn.BackupVerification{Result: longhorn.BackupVerificationFailed, VerifiedAt: metav1.NewTime(now), BadBlocks: 3, DurationSeconds: "1.000"}
	// db's newest backup in offsite, newer than its newest in default,
	// passed: offsite's says so, default's still says its newest failed.
	offsite := backup("db-off-1", "db", testNode, "2026-11-26T06:00:00Z", passed)
	offsite.Labels[types.LabelBackupTarget] = "offsite"
	c := cachedCollector(t, now, offsite,
		backup("db-1", "db", testNode, "2026-11-25T00:00:00Z", passed),
		backup("db-2", "db", testNode, "2026-11-26T00:00:00Z", failed),
		backup("web-1", "web", testNode, "2026-11-26T00:00:00Z", passed),
		backup("log-1", "log", testNode, "2026-11-26T00:00:00Z", nil),
		backup("other-1", "other", "node-2", "2026-11-26T00:00:00Z", passed),
	)
	got := gather(t, c)
	for series, want := range map[string]float64{
		`longhorn_backup_verify_result{backup="db-2",result="Failed",volume="db"}`:                       1,
		`longhorn_backup_verify_result{backup="db-2",result="Passed",volume="db"}`:                       0,
		`longhorn_backup_verify_bad_blocks{backup="db-2",volume="db"}`:                                   3,
		`longhorn_backup_verify_duration_seconds{backup="db-1",volume="db"}`:                             2.5,
		`longhorn_backup_last_verified_timestamp_seconds{backup="db-2",volume="db"}`:                     float64(now.Unix()),
		`longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="default",volume="db"}`:  0,
		`longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="offsite",volume="db"}`:  float64(now.Add(-time.Hour).Unix()),
		`longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="default",volume="web"}`: float64(now.Add(-time.Hour).Unix()),
		`longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="default",volume="log"}`: 0,
		`longhorn_volume_newest_backup_created_timestamp_seconds{backup_target="default",volume="log"}`:  float64(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC).Unix()),
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (served %v), want %v", series, v, ok, want)
		}
	}
	for series := range got {
		if series == `longhorn_volume_newest_backup_verified_timestamp_seconds{backup_target="default",volume="other"}` || series == `longhorn_backup_verify_result{backup="log-1",result="Passed",volume="log"}` {
			t.Errorf("served %s", series)
		}
	}
}
