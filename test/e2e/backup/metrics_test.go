//go:build e2e

package backup

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestMetricsOfBackupsAndTheTarget takes a backup to a file:// target and
// reads its series, the volume's recovery point and the target's health;
// then it points the target at a file, which cannot be read, and finds
// the target unreachable.
func TestMetricsOfBackupsAndTheTarget(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 2M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	target := "file://" + t.TempDir()
	e.SetBackupTarget(t, target)
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)

	framework.EventuallyAgree(t, 60*time.Second, "the metrics of a completed backup", func() string {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
		if err != nil || b.Status.State != "Completed" {
			return "backup not completed yet"
		}
		done, err := time.Parse(time.RFC3339Nano, b.Status.BackupCreatedAt)
		if err != nil {
			t.Fatalf("backupCreatedAt %q: %v", b.Status.BackupCreatedAt, err)
		}
		size, _ := strconv.ParseFloat(b.Status.Size, 64)
		m := e.ScrapeMetrics(t)
		want := map[string]float64{
			framework.Series("longhorn_backup_state", "backup", backup, "volume", "src", "backup_target", "default", "state", "Completed"):  1,
			framework.Series("longhorn_backup_state", "backup", backup, "volume", "src", "backup_target", "default", "state", "InProgress"): 0,
			framework.Series("longhorn_backup_size_bytes", "backup", backup, "volume", "src", "backup_target", "default"):                   size,
			framework.Series("longhorn_volume_last_backup_timestamp_seconds", "volume", "src", "backup_target", "default"):                  float64(done.UnixNano()) / 1e9,
			framework.Series("longhorn_backup_target_reachable", "backup_target", "default"):                                                1,
		}
		// The duration runs from the Backup object's creation, when the
		// manager first saw the backup, to its completion.
		if d := done.Sub(b.CreationTimestamp.Time).Seconds(); d > 0 {
			t.Logf("backup took %.3fs after its object's creation", d)
			want[framework.Series("longhorn_backup_duration_seconds", "backup", backup, "volume", "src", "backup_target", "default")] = d
			want[framework.Series("longhorn_backup_throughput_bytes_per_second", "backup", backup, "volume", "src", "backup_target", "default")] = size / d
		} else if _, ok := m[framework.Series("longhorn_backup_duration_seconds", "backup", backup, "volume", "src", "backup_target", "default")]; ok {
			t.Fatalf("a duration for a backup that completed before its object was made")
		}
		if size <= 0 {
			t.Fatalf("backup size %q", b.Status.Size)
		}
		if m[framework.Series("longhorn_backup_target_last_success_timestamp_seconds", "backup_target", "default")] <= 0 {
			return "no successful poll of the target yet"
		}
		return framework.ExpectSeries(m, want)
	})

	// A target that is a file cannot be read: unreachable, and never read
	// (the health is of the target set now).
	file := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"file://`+file+`"}`).Expect(t, 200)
	framework.EventuallyAgree(t, 60*time.Second, "the target unreachable", func() string {
		m := e.ScrapeMetrics(t)
		return framework.ExpectSeries(m, map[string]float64{
			framework.Series("longhorn_backup_target_reachable", "backup_target", "default"):                      0,
			framework.Series("longhorn_backup_target_last_success_timestamp_seconds", "backup_target", "default"): 0,
		})
	})
}
