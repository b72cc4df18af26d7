//go:build e2e

package systembackup

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestASystemBackupRestoresAVolumeOnlyFromItsOwnBackups: a backup made
// through the API records the volume's UID; a volume deleted and made
// again under its name is not pointed at the old volume's backup by
// if-not-present, which backs it up; once a drill finds that backup
// damaged, the system backup's next backup of the volume is full.
func TestASystemBackupRestoresAVolumeOnlyFromItsOwnBackups(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	target := "file://" + root
	e.SetBackupTarget(t, target)
	// db of two 2 MiB blocks, each of its own content.
	makeVolume := func(first, second string) *longhorn.Volume {
		t.Helper()
		e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
		e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
		v := e.WaitVolume(t, "db", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
		framework.QemuIO(t, v["endpoint"].(string), "write -P "+first+" 0 2M", "write -P "+second+" 2M 2M", "flush")
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return vol
	}
	backup := func(name string) *longhorn.Backup {
		t.Helper()
		var b *longhorn.Backup
		framework.Eventually(t, 60*time.Second, "backup "+name+" Completed", func() (bool, error) {
			var err error
			b, err = e.LH.LonghornV1beta2().Backups(e.NS).Get(ctx, name, metav1.GetOptions{})
			return err == nil && b.Status.State == longhorn.BackupStateCompleted, nil
		})
		return b
	}
	// archivedBackup makes a system backup and returns the backup its
	// archive restores db from.
	archivedBackup := func(name, policy string) string {
		t.Helper()
		e.Call(t, "POST", "/v1/systembackups", `{"name":"`+name+`","volumeBackupPolicy":"`+policy+`"}`).Expect(t, 200)
		var sb *longhorn.SystemBackup
		framework.Eventually(t, 2*time.Minute, "system backup "+name+" Ready", func() (bool, error) {
			sb = systemBackup(t, e, name)
			if sb != nil && sb.Status.State == longhorn.SystemBackupStateError {
				t.Fatalf("system backup %s failed: %+v", name, sb.Status.Conditions)
			}
			return sb != nil && sb.Status.State == longhorn.SystemBackupStateReady, nil
		})
		data, err := os.ReadFile(filepath.Join(root, "backupstore/system-backups", sb.Status.Version, name, systembackup.ZipFile))
		if err != nil {
			t.Fatal(err)
		}
		c, err := systembackup.Parse(name, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.Volumes {
			if v.Name == "db" {
				return v.Status.LastBackup
			}
		}
		t.Fatalf("system backup %s: db is not archived", name)
		return ""
	}

	old := makeVolume("0x11", "0x12")
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	b1 := e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"s1","labels":{"longhorn.io/volume-uid":"forged"}}`).Expect(t, 200).Body["name"].(string)
	if uid := backup(b1).Status.Labels[types.LabelVolumeUID]; uid != string(old.UID) {
		t.Fatalf("backup %s records volume UID %q, want the volume's %q", b1, uid, old.UID)
	}

	// db deleted and made again under its name: the target's last backup
	// of db is the old volume's.
	e.Call(t, "POST", "/v1/volumes/db?action=detach", `{}`).Expect(t, 200)
	e.WaitVolume(t, "db", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "DELETE", "/v1/volumes/db", "").Expect(t, 204)
	framework.Eventually(t, 60*time.Second, "db deleted", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "db", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	cur := makeVolume("0x21", "0x22")
	b2 := archivedBackup("sb-1", "if-not-present")
	if b2 == "" || b2 == b1 {
		t.Fatalf("the archive restores the volume made again from backup %q (the old volume's is %s)", b2, b1)
	}
	if uid := backup(b2).Status.Labels[types.LabelVolumeUID]; uid != string(cur.UID) {
		t.Fatalf("the system backup's backup %s records volume UID %q, want %q", b2, uid, cur.UID)
	}

	// A drill finds b2 damaged (one block holds the other's content).
	store, err := backupstore.OpenWithCredential(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := backupstore.NewDriver(target, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := store.Get("db", b2)
	if err != nil || len(info.Blocks) != 2 {
		t.Fatalf("backup %s: %+v, %v", b2, info, err)
	}
	other, err := d.Read(backupstore.BlockKey(info, info.Blocks[1]), 8<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(backupstore.BlockKey(info, info.Blocks[0]), other); err != nil {
		t.Fatal(err)
	}
	asked := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"name":"`+b2+`"}`).Expect(t, 200).Body["verifyRequestedAt"].(string)
	askedAt, err := time.Parse(time.RFC3339, asked)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the drill of "+b2+" Failed", func() (bool, error) {
		ver := backup(b2).Status.Verification
		return ver != nil && !ver.RequestedAt.Time.Before(askedAt) && ver.Result == longhorn.BackupVerificationFailed, nil
	})

	// if-not-present does not take the damaged backup, and the new one
	// is full: an incremental one would share the damaged block.
	b3 := archivedBackup("sb-2", "if-not-present")
	if b3 == "" || b3 == b2 {
		t.Fatalf("the archive restores db from backup %q after a drill found %s damaged", b3, b2)
	}
	got, err := store.Get("db", b3)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode != backupstore.ModeFull {
		t.Fatalf("the system backup's backup %s after the failed drill is %q, want full", b3, got.Mode)
	}
}
