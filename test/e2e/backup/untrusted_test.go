//go:build e2e

package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestAMalformedBackupInTheTargetIsAnErrorNotACrash: a backup config with
// an empty block checksum (it used to panic the daemon on every restore
// retry) shows as a Backup in Error naming the field, a volume restored
// from it says why it cannot be, and the daemon keeps serving.
func TestAMalformedBackupInTheTargetIsAnErrorNotACrash(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := t.TempDir()
	dir := filepath.Join(root, "backupstore", "volumes", "vol", "backups")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := `{"name":"backup-bad","volumeName":"vol","volumeSize":8388608,"snapshotName":"s1","compression":"gzip","createdAt":"2026-11-23T10:00:00Z","blocks":[{"offset":0,"checksum":""}]}`
	if err := os.WriteFile(filepath.Join(dir, "backup_backup-bad.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := `{"name":"vol","size":8388608,"lastBackupName":"backup-bad"}`
	if err := os.WriteFile(filepath.Join(root, "backupstore", "volumes", "vol", "volume.cfg"), []byte(vol), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"file://`+root+`"}`).Expect(t, 200)

	framework.Eventually(t, 30*time.Second, "the malformed backup as a Backup in Error", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), "backup-bad", metav1.GetOptions{})
		return err == nil && b.Status.State == "Error" && strings.Contains(b.Status.Error, "blocks[0].checksum"), nil
	})
	url := "file://" + root + "?backup=backup-bad&volume=vol"
	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the restore's error in the volume's Restore condition", func() (bool, error) {
		v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range v.Status.Conditions {
			if c.Type == "Restore" && c.Status == "False" && strings.Contains(c.Message, "blocks[0].checksum") {
				return v.Status.RestoreRequired, nil
			}
		}
		return false, nil
	})
	// Still serving, after several restore retries.
	time.Sleep(2 * time.Second)
	e.Call(t, "GET", "/v1/volumes/copy", "").Expect(t, 200)
	// Deleting the bad backup works: nothing else reads it.
	e.Call(t, "POST", "/v1/backupvolumes/vol?action=backupDelete", `{"name":"backup-bad"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the malformed backup deleted from the target", func() (bool, error) {
		_, err := os.Stat(filepath.Join(dir, "backup_backup-bad.cfg"))
		return os.IsNotExist(err), nil
	})
}
