//go:build e2e

package backup

import (
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestADamagedBackupInOneTargetMakesTheNextBackupThereFull: a drill that
// finds the volume's backup in offsite damaged, though the volume's
// newest backup is in default, makes its next backup to offsite full (the
// damaged block uploaded again) and leaves its next backup to default
// incremental; the volume's event names offsite.
func TestADamagedBackupInOneTargetMakesTheNextBackupThereFull(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	offsiteURL := "file://" + t.TempDir()
	e.SetBackupTarget(t, "file://"+t.TempDir())
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"`+offsiteURL+`","pollInterval":"300"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "offsite cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	endpoint := e.AttachVolume(t, "db")
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 2M", "write -P 0x6b 2M 2M", "flush")
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	backupTo := func(target string) *longhorn.Backup {
		t.Helper()
		name := e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"s1","backupTargetName":"`+target+`"}`).Expect(t, 200).Body["name"].(string)
		e.CompletedBackupURL(t, name)
		return backupObject(t, e, name)
	}
	away := backupTo("offsite")
	backupTo("default") // the volume's newest backup

	// Rot in offsite: a block of its backup gone.
	store, err := backupstore.Open(offsiteURL)
	if err != nil {
		t.Fatal(err)
	}
	info, err := store.Get("db", away.Name)
	if err != nil {
		t.Fatal(err)
	}
	d, err := backupstore.NewDriver(offsiteURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(backupstore.BlockKey(info, info.Blocks[1])); err != nil {
		t.Fatal(err)
	}
	r := e.Call(t, "POST", "/v1/backupvolumes/"+types.BackupVolumeObjectName("db", "offsite")+"?action=backupVerify", `{}`).Expect(t, 200)
	if ver := waitDrill(t, e, away.Name, r.Body["verifyRequestedAt"].(string)); ver.Result != longhorn.BackupVerificationFailed {
		t.Fatalf("the drill of the damaged backup in offsite: %+v", ver)
	}
	e.WaitEvent(t, "Volume", "db", "BackupVerifyFailed", "next backup will be full in backup target offsite")

	if b := backupTo("default"); b.Status.BackupMode != backupstore.ModeIncremental {
		t.Fatalf("the next backup to default, whose blocks are whole, is %q", b.Status.BackupMode)
	}
	if b := backupTo("offsite"); b.Status.BackupMode != backupstore.ModeFull || b.Status.ReUploadedDataSize == "0" {
		t.Fatalf("the next backup to offsite: mode %q, re-uploaded %s", b.Status.BackupMode, b.Status.ReUploadedDataSize)
	}
	if b := backupTo("offsite"); b.Status.BackupMode != backupstore.ModeIncremental {
		t.Fatalf("the backup to offsite after its full one is %q", b.Status.BackupMode)
	}
}
