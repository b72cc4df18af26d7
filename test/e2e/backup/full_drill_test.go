//go:build e2e

package backup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

const fullDrillSize = "32Mi"

// A full drill on file://: a backup of a volume holding a whole ext4
// filesystem restores into a scratch volume and passes e2fsck -n; a
// backup whose every block is whole and whose digest matches, but whose
// filesystem was corrupted before it was made, fails the full drill
// naming e2fsck's finding, on the Backup, the volume, an event and
// /metrics. No scratch volume is left after either.
func TestAFullDrillRestoresChecksTheFilesystemAndDeletesItsScratchVolume(t *testing.T) {
	needRoot(t)
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.SetBackupTarget(t, "file://"+t.TempDir())
	endpoint := ext4Volume(t, e)
	writeImage(t, endpoint, ext4Image(t, false))
	b1 := takeBackup(t, e, "s1")
	waitBackupVolume(t, e)

	// A full drill asked for with a wrong type is refused, naming full.
	e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"full":"yes"}`).Expect(t, 400, "full")

	r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"full":true}`).Expect(t, 200)
	if r.Body["verifyFull"] != true {
		t.Fatalf("backupVerify full answered %s", r.Raw)
	}
	ver := waitDrill(t, e, b1, r.Body["verifyRequestedAt"].(string))
	if ver.Result != longhorn.BackupVerificationPassed || ver.Full == nil || !ver.Full.Restored || ver.Full.Filesystem != "ext4" ||
		ver.Full.FilesystemCheck != longhorn.FilesystemCheckPassed || ver.Full.RestoreSeconds == "" || !strings.Contains(ver.Full.FilesystemCheckOutput, "e2fsck -n -f") {
		t.Fatalf("the full drill of a whole ext4 backup: %+v %+v", ver, ver.Full)
	}
	noScratchVolumes(t, e)

	// The filesystem corrupted (its root inode cleared) and backed up:
	// the backup is internally consistent, every block hashing to its
	// name and the digest matching, yet what it restores is corrupt.
	writeImage(t, endpoint, ext4Image(t, true))
	b2 := takeBackup(t, e, "s2")
	// A backup-verify job's run with full-drill, as its CronJob pod runs
	// it: it fails, naming the corrupt filesystem.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"backup-verify","cron":"@weekly","retain":0,"concurrency":1,"groups":["default"],"parameters":{"full-drill":"yes"}}`).
		Expect(t, 400, "full-drill")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"drill","task":"backup-verify","cron":"@weekly","retain":0,"concurrency":1,"groups":["default"],"parameters":{"full-drill":"true"}}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/drill", "").Status == 200, nil })
	cmd := exec.Command(framework.ManagerBinary(t), "recurring-job", "drill", "--manager-url", e.Base+"/v1",
		"--kubeconfig", framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS), "--namespace", e.NS, "--tick", "2026-11-26T00:00:00Z", "--backup-timeout", "2m")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "failed=1") || !strings.Contains(string(out), "filesystem is corrupt") {
		t.Fatalf("the full drill's run: %v\n%s", err, out)
	}
	ver = backupObject(t, e, b2).Status.Verification
	if ver.Result != longhorn.BackupVerificationFailed || ver.BadBlocks != 0 || ver.Full == nil || !ver.Full.Restored ||
		ver.Full.FilesystemCheck != longhorn.FilesystemCheckFailed || !strings.Contains(ver.Message, "the restored ext4 filesystem is corrupt") ||
		!strings.Contains(ver.Full.FilesystemCheckOutput, "Root inode not allocated") {
		t.Fatalf("the full drill of a corrupt filesystem: %+v %+v", ver, ver.Full)
	}
	vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || vol.Status.LastBackupVerification == nil || vol.Status.LastBackupVerification.Backup != b2 ||
		vol.Status.LastBackupVerification.Full == nil || vol.Status.LastBackupVerification.Full.FilesystemCheck != longhorn.FilesystemCheckFailed {
		t.Fatalf("the volume's record of the full drill: %+v, %v", vol.Status.LastBackupVerification, err)
	}
	noScratchVolumes(t, e)
	e.WaitEvent(t, "Volume", "db", "BackupVerifyFailed", "filesystem is corrupt")
	// The blocks were whole: the next backup is not made full.
	if b3 := takeBackup(t, e, "s3"); backupObject(t, e, b3).Status.BackupMode != "incremental" {
		t.Fatalf("the backup after a failed filesystem check is %q", backupObject(t, e, b3).Status.BackupMode)
	}
	framework.Eventually(t, 30*time.Second, "the full drills on /metrics", func() (bool, error) {
		m := e.ScrapeMetrics(t)
		_, timed := m[`longhorn_backup_drill_restore_seconds{backup="`+b2+`",volume="db"}`]
		return timed && m[`longhorn_backup_drill_filesystem_check{backup="`+b2+`",result="Failed",volume="db"}`] == 1 &&
			m[`longhorn_backup_drill_filesystem_check{backup="`+b1+`",result="Passed",volume="db"}`] == 1 &&
			m[`longhorn_backup_drill_restored{backup="`+b2+`",volume="db"}`] == 1, nil
	})

	// The filesystem's start zeroed (its superblock with it) and backed
	// up: the backup restores whole, but holds no filesystem where the
	// drills above found ext4. Not a pass: the filesystem is lost.
	writeImage(t, endpoint, zeroHead(t, ext4Image(t, false), 64<<10))
	b4 := takeBackup(t, e, "s4")
	r = e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"name":"`+b4+`","full":true}`).Expect(t, 200)
	ver = waitDrill(t, e, b4, r.Body["verifyRequestedAt"].(string))
	if ver.Result != longhorn.BackupVerificationFailed || ver.Full == nil || !ver.Full.Restored || ver.Full.Filesystem != "none" ||
		ver.Full.FilesystemCheck != longhorn.FilesystemCheckFailed || !strings.Contains(ver.Message, "the restored filesystem is lost") ||
		!strings.Contains(ver.Full.FilesystemCheckOutput, "found ext4") {
		t.Fatalf("the full drill of a backup whose filesystem's start is zeroed: %+v %+v", ver, ver.Full)
	}
	noScratchVolumes(t, e)
}

// zeroHead zeroes the first n bytes of the image at img, as a wipe of a
// filesystem's start would, and returns img.
func zeroHead(t *testing.T, img string, n int) string {
	t.Helper()
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), 0); err != nil {
		t.Fatal(err)
	}
	return img
}

// A full drill cut short by the manager's end leaves no scratch volume
// once the manager is back: the drill asked for runs again and deletes
// its own, and a scratch volume a crashed drill left (made here by hand,
// as one would be left) is deleted at start; a user's volume of a
// scratch volume's look is not touched.
func TestAFullDrillCutShortLeavesNoScratchVolume(t *testing.T) {
	needRoot(t)
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	dataDir := t.TempDir()
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	d := framework.StartDaemon(t, cfg, ns, "node-1", dataDir)
	e := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}, Base: "http://" + d.APIAddress}
	e.SetBackupTarget(t, "file://"+t.TempDir())
	writeImage(t, ext4Volume(t, e), ext4Image(t, false))
	b1 := takeBackup(t, e, "s1")
	waitBackupVolume(t, e)

	r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupVerify", `{"full":true}`).Expect(t, 200)
	asked := r.Body["verifyRequestedAt"].(string)
	// Cut it short as soon as its scratch volume is there (or, on a fast
	// machine, whenever it is).
	framework.Eventually(t, 30*time.Second, "the full drill under way", func() (bool, error) {
		return len(scratchVolumes(t, e)) > 0 || backupObject(t, e, b1).Status.Verification != nil, nil
	})
	d.Stop(t)

	// What a crashed drill leaves (labelled, owned by the Backup it
	// drilled), and a user's volume that looks alike.
	owner := backupObject(t, e, b1)
	leftover := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-000000000000",
		Labels:          map[string]string{types.LabelBackupVerifyScratch: b1, types.LabelBackupVerifyNode: "node-1"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: longhorn.SchemeGroupVersion.String(), Kind: "Backup", Name: owner.Name, UID: owner.UID}}},
		Spec: longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1}}
	mine := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "drill-mine"}, Spec: longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1}}
	for _, v := range []*longhorn.Volume{leftover, mine} {
		if _, err := e.LH.LonghornV1beta2().Volumes(ns).Create(context.Background(), v, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	d = framework.StartDaemon(t, cfg, ns, "node-1", dataDir)
	e.Base = "http://" + d.APIAddress
	ver := waitDrill(t, e, b1, asked)
	if ver.Result != longhorn.BackupVerificationPassed || ver.Full == nil || ver.Full.FilesystemCheck != longhorn.FilesystemCheckPassed {
		t.Fatalf("the full drill after the restart: %+v %+v", ver, ver.Full)
	}
	noScratchVolumes(t, e)
	if _, err := e.LH.LonghornV1beta2().Volumes(ns).Get(context.Background(), "drill-mine", metav1.GetOptions{}); err != nil {
		t.Fatalf("the user's volume drill-mine: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dataDir, "backup-drill"))
	if len(entries) != 0 {
		t.Fatalf("the full drills' devices left %d folders", len(entries))
	}
}

func needRoot(t *testing.T) {
	t.Helper()
	testcluster.SkipIfShort(t, "a control plane, root, e2fsprogs and nbdfuse")
	if os.Geteuid() != 0 {
		t.Skip("a full drill makes a loop device of the scratch volume: it needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "debugfs", "e2fsck", "nbdfuse", "nbdcopy", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: scripts/install-test-deps.sh installs e2fsprogs, libnbd-bin and util-linux", tool)
		}
	}
}

// ext4Volume makes the volume db, attached, and returns its endpoint.
func ext4Volume(t *testing.T, e *framework.APIEnv) string {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"`+fullDrillSize+`","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "db", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	return v["endpoint"].(string)
}

// ext4Image is a file holding an ext4 filesystem of the volume's size
// with a few files in it; corrupt clears its root inode (debugfs -w), a
// damage e2fsck -n reports.
func ext4Image(t *testing.T, corrupt bool) string {
	t.Helper()
	dir := t.TempDir()
	content := filepath.Join(dir, "content")
	if err := os.MkdirAll(filepath.Join(content, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b", "data/c"} {
		if err := os.WriteFile(filepath.Join(content, name), []byte(strings.Repeat(name, 100000)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "fs.img")
	run(t, "mkfs.ext4", "-q", "-F", "-d", content, img, fullDrillSize[:2]+"M")
	if corrupt {
		run(t, "debugfs", "-w", "-R", "clri <2>", img)
	}
	return img
}

// writeImage writes the image over the volume through its NBD export.
func writeImage(t *testing.T, endpoint, img string) {
	t.Helper()
	run(t, "nbdcopy", img, endpoint)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func scratchVolumes(t *testing.T, e *framework.APIEnv) []string {
	t.Helper()
	list, err := e.LH.LonghornV1beta2().Volumes(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: types.LabelBackupVerifyScratch})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range list.Items {
		names = append(names, v.Name)
	}
	return names
}

func noScratchVolumes(t *testing.T, e *framework.APIEnv) {
	t.Helper()
	framework.Eventually(t, 60*time.Second, "no scratch volume left", func() (bool, error) {
		return len(scratchVolumes(t, e)) == 0, nil
	})
}

func waitBackupVolume(t *testing.T, e *framework.APIEnv) {
	t.Helper()
	framework.Eventually(t, 30*time.Second, "the backup volume listed", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backupvolumes/db", "").Status == 200, nil
	})
}
