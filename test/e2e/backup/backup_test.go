//go:build e2e

package backup

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestBackupThroughTheAPIAndRestoreIntoANewVolume(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 2M", "write -P 0x33 6M 1M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)

	e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 400, "backup-target")
	target := "file://" + t.TempDir()
	e.SetBackupTarget(t, target)
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"missing"}`).Expect(t, 404)
	started := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1","labels":{"RecurringJob":"nightly"}}`).Expect(t, 200)
	backup := started.Body["name"].(string)

	var url string
	framework.Eventually(t, 30*time.Second, "a Completed backup listed under its backup volume", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/backupvolumes/src?action=backupList", "")
		if r.Status != 200 {
			return false, nil
		}
		for _, item := range r.Body["data"].([]any) {
			b := item.(map[string]any)
			if b["name"] == backup && b["state"] == "Completed" {
				url = b["url"].(string)
				return b["snapshotName"] == "s1" && b["labels"].(map[string]any)["RecurringJob"] == "nightly", nil
			}
		}
		return false, nil
	})
	framework.Eventually(t, 10*time.Second, "backup volume names its last backup", func() (bool, error) {
		bv := e.Call(t, "GET", "/v1/backupvolumes/src", "")
		return bv.Status == 200 && bv.Body["lastBackupName"] == backup && bv.Body["size"] == "8388608", nil
	})
	if got := framework.Names(e.Call(t, "GET", "/v1/backupvolumes", "").Expect(t, 200)); strings.Join(got, ",") != "src" {
		t.Errorf("backup volumes %v", got)
	}
	obj, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
	if err != nil || obj.Status.URL != url {
		t.Fatalf("Backup object: %+v, %v", obj, err)
	}

	// Overwrite, then restore the backup into a new volume: it reads what s1 held.
	framework.QemuIO(t, endpoint, "write -P 0x00 0 8M", "flush")
	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":2,"fromBackup":"not a url"}`).Expect(t, 400, "fromBackup")
	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":2,"fromBackup":"`+url+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "restore done", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolume(t, "copy", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	// The whole restored volume, byte for byte, is what s1 held.
	want := make([]byte, 8<<20)
	for i := 0; i < 2<<20; i++ {
		want[i] = 0x5a
	}
	for i := 6 << 20; i < 7<<20; i++ {
		want[i] = 0x33
	}
	if got := framework.DeviceContent(t, c["endpoint"].(string)); sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatal("the restored volume's checksum differs from the snapshot's")
	}

	// Deleting the backup removes it from the target and the list.
	e.Call(t, "POST", "/v1/backupvolumes/src?action=backupDelete", `{"name":"`+backup+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "backup gone", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/backupvolumes/src?action=backupList", "")
		return r.Status == 404 || (r.Status == 200 && len(r.Body["data"].([]any)) == 0), nil
	})
	e.Call(t, "POST", "/v1/backupvolumes/src?action=backupGet", `{"name":"`+backup+`"}`).Expect(t, 404)

	// A target that cannot be written (a folder under a file, inside the
	// daemon's file:// roots): the backup's error lands in its Backup
	// object, and nothing half-written becomes visible.
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"file://`+file+`/backups"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "broken target in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, file), nil
	})
	failed := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	framework.Eventually(t, 30*time.Second, "the failed backup's error in its Backup object", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), failed, metav1.GetOptions{})
		return err == nil && b.Status.State == "Error" && strings.Contains(b.Status.Error, "not a directory"), nil
	})
}
