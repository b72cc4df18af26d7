//go:build e2e

package backup

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// xfsDrillSize is a volume mkfs.xfs takes: 300 MiB at the least.
const xfsDrillSize = "320Mi"

// A full drill of xfs backups in a real S3 server: a whole filesystem
// restores into a scratch volume and passes xfs_repair -n; one whose root
// inode was cleared before the backup (every block whole, the digest
// matching) fails, naming xfs_repair's finding. No scratch volume is left.
func TestAnXFSFullDrillOnS3(t *testing.T) {
	needRoot(t)
	for _, tool := range []string{"mkfs.xfs", "xfs_repair", "xfs_db"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: scripts/install-test-deps.sh installs xfsprogs", tool)
		}
	}
	t.Parallel()
	srv := s3test.Start(t)
	e := framework.NewAPIEnv(t)
	e.PutSecret(t, "s3-secret", srv.Credential())
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	e.SetBackupTarget(t, srv.Target(""))
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"`+xfsDrillSize+`","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	endpoint := e.WaitVolume(t, "db", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)

	// The image is sparse (65 of 320 MiB): nbdcopy skips its holes, the
	// volume reading zeros there already (both images have the same
	// holes), rather than writing 255 MiB of zeros.
	run(t, "nbdcopy", "--destination-is-zero", xfsImage(t, false), endpoint)
	b1 := takeBackup(t, e, "s1")
	waitBackupVolume(t, e)
	r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"full":true}`).Expect(t, 200)
	ver := waitDrillFor(t, e, b1, r.Body["verifyRequestedAt"].(string), 3*time.Minute)
	if ver.Result != longhorn.BackupVerificationPassed || ver.Full == nil || !ver.Full.Restored || ver.Full.Filesystem != "xfs" ||
		ver.Full.FilesystemCheck != longhorn.FilesystemCheckPassed || !strings.Contains(ver.Full.FilesystemCheckOutput, "xfs_repair -n") {
		t.Fatalf("the full drill of a whole xfs backup: %+v %+v", ver, ver.Full)
	}
	noScratchVolumes(t, e)

	run(t, "nbdcopy", "--destination-is-zero", xfsImage(t, true), endpoint)
	b2 := takeBackup(t, e, "s2")
	r = e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"full":true}`).Expect(t, 200)
	ver = waitDrillFor(t, e, b2, r.Body["verifyRequestedAt"].(string), 3*time.Minute)
	if ver.Result != longhorn.BackupVerificationFailed || ver.BadBlocks != 0 || ver.Full == nil || !ver.Full.Restored ||
		ver.Full.FilesystemCheck != longhorn.FilesystemCheckFailed || !strings.Contains(ver.Message, "the restored xfs filesystem is corrupt") {
		t.Fatalf("the full drill of a corrupt xfs filesystem: %+v %+v", ver, ver.Full)
	}
	noScratchVolumes(t, e)
	e.WaitEvent(t, "Volume", "db", "BackupVerifyFailed", "filesystem is corrupt")
}

// xfsImage is a file holding an empty xfs filesystem of the volume's
// size; corrupt zeroes its root inode's mode (xfs_db -x), a damage
// xfs_repair -n reports.
func xfsImage(t *testing.T, corrupt bool) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "fs.img")
	run(t, "truncate", "-s", strings.TrimSuffix(xfsDrillSize, "i"), img)
	run(t, "mkfs.xfs", "-q", "-f", img)
	if corrupt {
		run(t, "xfs_db", "-x", "-c", "sb 0", "-c", "inode 128", "-c", "write core.mode 0", img)
	}
	return img
}
