//go:build e2e

package backup

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A backup to S3 through the API with the credential Secret, restored
// byte for byte; a missing Secret and wrong keys said plainly where the
// user looks: the API's answer, the Backup's error, the BackupVolume's
// messages and Warning events on the setting.
func TestBackupToS3WithTheCredentialSecret(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x7e 1M 2M", "write -P 0x21 5M 512k", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)

	target := srv.Target("")
	if target != "s3://backups@us-east-1/" {
		t.Fatalf("target %q", target)
	}
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "settings in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, target) &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target-credential-secret", "").Raw, "s3-secret"), nil
	})

	// The setting names a Secret the manager may not read: the manager's
	// Role grants longhorn-backup-credential alone, and the refusal says
	// what to grant.
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 400,
		`Secret \"s3-secret\", which the manager may not read: name the Secret longhorn-backup-credential (Role longhorn-backup-credentials), or grant get on it`)
	e.SettingWarning(t, types.SettingNameBackupTargetCredentialSecret, "s3-secret", "may not read")

	// Granted, as docs/deploying.md tells an administrator, but not there.
	framework.GrantSecret(t, e.Cluster, e.Kube, e.NS, "s3-secret")
	// (The setting's warning event comes from the target's polls, which
	// a grant does not start; a backup asked for reads the Secret.)
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 400, `Secret \"s3-secret\", which does not exist`)

	// Wrong keys: the backup starts and its Backup says why it failed.
	wrong := srv.Credential()
	wrong["AWS_SECRET_ACCESS_KEY"] = "not-the-secret"
	e.PutSecret(t, "s3-secret", wrong)
	failed := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	framework.Eventually(t, 30*time.Second, "the failed backup's error in its Backup object", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), failed, metav1.GetOptions{})
		return err == nil && b.Status.State == "Error" &&
			strings.Contains(b.Status.Error, "access denied: check the backup-target-credential-secret"), nil
	})
	e.SettingWarning(t, types.SettingNameBackupTargetCredentialSecret, "access denied")

	// The right keys: backed up, listed, restored.
	e.PutSecret(t, "s3-secret", srv.Credential())
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
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
				return true, nil
			}
		}
		return false, nil
	})
	if !strings.HasPrefix(url, target+"?backup="+backup) {
		t.Errorf("backup URL %q", url)
	}
	// The BackupVolume's status follows from the target controller's
	// next sync of it, a moment after the Backup is Completed.
	framework.Eventually(t, 30*time.Second, "the BackupVolume's status naming the backup", func() (bool, error) {
		bv, err := e.LH.LonghornV1beta2().BackupVolumes(e.NS).Get(context.Background(), "src", metav1.GetOptions{})
		return err == nil && bv.Status.LastBackupName == backup && bv.Status.Size == "8388608", nil
	})
	obj, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
	if err != nil || obj.Status.URL != url || obj.Status.SnapshotName != "s1" {
		t.Fatalf("Backup object: %+v, %v", obj, err)
	}
	// The backup is in the bucket.
	client, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	cfgKey := "backupstore/volumes/src/backups/backup_" + backup + ".cfg"
	if _, err := client.StatObject(context.Background(), srv.Bucket, cfgKey, minio.StatObjectOptions{}); err != nil {
		t.Fatalf("%s in the bucket: %v", cfgKey, err)
	}

	framework.QemuIO(t, endpoint, "write -P 0x00 0 8M", "flush")
	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "restore done", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolume(t, "copy", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	want := make([]byte, 8<<20)
	copy(want[1<<20:3<<20], bytes.Repeat([]byte{0x7e}, 2<<20))
	copy(want[5<<20:5<<20+512<<10], bytes.Repeat([]byte{0x21}, 512<<10))
	if got := framework.DeviceContent(t, c["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume restored from S3 differs from the snapshot")
	}

	// The setting switched to a Secret with wrong keys: the BackupVolume
	// says the target cannot be read, and keeps its backups.
	e.PutSecret(t, "s3-wrong", wrong)
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-wrong"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the BackupVolume's message", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/backupvolumes/src", "")
		msgs, _ := r.Body["messages"].(map[string]any)
		m, _ := msgs["backupTarget"].(string)
		return r.Status == 200 && strings.Contains(m, "access denied: check the backup-target-credential-secret"), nil
	})
	if _, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{}); err != nil {
		t.Fatalf("a target that cannot be read lost the Backup object: %v", err)
	}
	// Back to the right Secret: the message goes.
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the BackupVolume's message cleared", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/backupvolumes/src", "")
		return r.Status == 200 && r.Body["messages"] == nil, nil
	})
}
