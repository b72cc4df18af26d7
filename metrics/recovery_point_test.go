package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestRecoveryPointPerTarget: a volume's recovery point and backup
// interval are served per backup target. Its hourly job backs it up to
// its own target (offsite-a, the volume's), its nightly job to dr (the
// job's), each with its own interval; each target's newest completed
// backup is its recovery point there, so a target that falls behind
// shows though the other is fresh. A target holding a backup of it that
// no job backs up to (default, from before it moved) keeps its own
// recovery point and has no interval; an unfinished backup is none.
func TestRecoveryPointPerTarget(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	backup := func(name, target, created string, state longhorn.BackupState) *longhorn.Backup {
		return &longhorn.Backup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			Labels: map[string]string{types.LabelBackupVolume: "db", types.LabelBackupTarget: target}},
			Status: longhorn.BackupStatus{OwnerID: testNode, State: state, BackupCreatedAt: created, BackupTargetName: target}}
	}
	hourly := job("hourly", longhorn.RecurringJobTypeBackup, "0 * * * *", "gold")
	nightly := job("nightly", longhorn.RecurringJobTypeBackup, "0 2 * * *", "gold")
	nightly.Spec.BackupTargetName = "dr"
	db := volume("db", testNode, map[string]string{types.RecurringJobGroupLabelKey("gold"): types.LabelValueEnabled})
	db.Spec.BackupTargetName = "offsite-a"
	c := cachedCollector(t, now, hourly, nightly, db,
		backup("a-1", "offsite-a", "2026-11-26T10:00:00Z", longhorn.BackupStateCompleted),
		backup("a-2", "offsite-a", "2026-11-26T11:00:00Z", longhorn.BackupStateCompleted),
		backup("a-3", "offsite-a", "2026-11-26T11:30:00Z", longhorn.BackupStateInProgress),
		backup("dr-1", "dr", "2026-11-23T02:00:00Z", longhorn.BackupStateCompleted),
		backup("old-1", "default", "2026-11-20T02:00:00Z", longhorn.BackupStateCompleted),
	)
	got := gather(t, c)
	at := func(s string) float64 {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return float64(tm.Unix())
	}
	expectSeries(t, got, map[string]float64{
		`longhorn_volume_last_backup_timestamp_seconds{backup_target="offsite-a",volume="db"}`: at("2026-11-26T11:00:00Z"),
		`longhorn_volume_last_backup_timestamp_seconds{backup_target="dr",volume="db"}`:        at("2026-11-23T02:00:00Z"),
		`longhorn_volume_last_backup_timestamp_seconds{backup_target="default",volume="db"}`:   at("2026-11-20T02:00:00Z"),
		`longhorn_volume_backup_interval_seconds{backup_target="offsite-a",volume="db"}`:       3600,
		`longhorn_volume_backup_interval_seconds{backup_target="dr",volume="db"}`:              86400,
		`longhorn_volume_backup_interval_seconds{backup_target="default",volume="db"}`:         -1,
		`longhorn_volume_backup_jobs{volume="db"}`:                                             2,
	})
}
