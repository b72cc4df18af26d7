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
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// heldBackup is a backup in progress, held back by a deletion's lock in
// its file target, and the daemon that runs it.
type heldBackup struct {
	e                 *framework.APIEnv
	d                 *framework.RunningDaemon
	cfg               *rest.Config
	ns, dataDir, root string
	lock, backup      string
	opts              []func(*app.DaemonOptions)
}

func startHeldBackup(t *testing.T, opts ...func(*app.DaemonOptions)) *heldBackup {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	dataDir := t.TempDir()
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	d := framework.StartDaemon(t, cfg, ns, "node-1", dataDir, opts...)
	e := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}, Base: "http://" + d.APIAddress}

	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x42 0 4M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	root := t.TempDir()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"file://`+root+`"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "backup target in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, root), nil
	})
	// Another manager's deletion holds the volume: the backup waits.
	locks := filepath.Join(root, "backupstore", "volumes", "src", "locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(locks, "delete-other.lck")
	if err := os.WriteFile(lock, []byte(`{"kind":"delete","id":"other","host":"node-2","seq":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	framework.Eventually(t, 30*time.Second, "the Backup InProgress", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(ns).Get(context.Background(), backup, metav1.GetOptions{})
		return err == nil && b.Status.State == "InProgress", nil
	})
	return &heldBackup{e: e, d: d, cfg: cfg, ns: ns, dataDir: dataDir, root: root, lock: lock, backup: backup, opts: opts}
}

// restart stops the daemon and starts it again on its data.
func (h *heldBackup) restart(t *testing.T) {
	t.Helper()
	h.d.Stop(t)
	h.d = framework.StartDaemon(t, h.cfg, h.ns, "node-1", h.dataDir, h.opts...)
	h.e.Base = "http://" + h.d.APIAddress
}

// TestABackupInterruptedByAManagerRestartIsMarkedFailed: the manager stops
// while a backup is in progress (held back by a deletion's lock in the
// target); after it comes back the Backup says it was interrupted, never
// Completed, and stays. (With the engines in an instance manager the
// backup is not interrupted: TestABackupRunsOnThroughAManagerRestart.)
func TestABackupInterruptedByAManagerRestartIsMarkedFailed(t *testing.T) {
	t.Parallel()
	if os.Getenv(framework.InstanceManagerEnv) == app.InstanceManagerProcess {
		t.Skip("the engines run in an instance manager: a manager's restart interrupts no backup")
	}
	h := startHeldBackup(t)
	e, ns, backup, root := h.e, h.ns, h.backup, h.root
	h.restart(t)
	framework.Eventually(t, 60*time.Second, "the Backup marked interrupted", func() (bool, error) {
		b, err := e.LH.LonghornV1beta2().Backups(ns).Get(context.Background(), backup, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if b.Status.State == "Completed" {
			t.Fatal("the interrupted backup shows Completed")
		}
		return b.Status.State == "Error" && strings.Contains(b.Status.Error, "interrupted"), nil
	})
	// It stays, so the failure is seen, until it is deleted.
	time.Sleep(3 * time.Second)
	if b, err := e.LH.LonghornV1beta2().Backups(ns).Get(context.Background(), backup, metav1.GetOptions{}); err != nil || b.Status.State != "Error" {
		t.Fatalf("the interrupted Backup after a while: %+v, %v", b, err)
	}
	// The first daemon's backup still waits in this test process, as a
	// killed manager's would not: a file where its folder was ends it.
	if err := os.RemoveAll(filepath.Join(root, "backupstore")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "backupstore"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
}

// TestARestoreOfACorruptedBlockLeavesTheVolumeNotReady: a block corrupted
// in the target fails the restore naming the block, and the volume is not
// attached with wrong bytes.
func TestARestoreOfACorruptedBlockLeavesTheVolumeNotReady(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 2M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	root := t.TempDir()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"file://`+root+`"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "backup target in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, root), nil
	})
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	url := e.CompletedBackupURL(t, backup)
	// Flip a byte in the middle of the one block.
	var block string
	filepath.Walk(filepath.Join(root, "backupstore"), func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".blk") {
			block = p
		}
		return nil
	})
	data, err := os.ReadFile(block)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(block, data, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(block), ".blk"), ".lz4")

	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "the restore's error naming the block", func() (bool, error) {
		v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range v.Status.Conditions {
			if c.Type == "Restore" && c.Status == "False" && strings.Contains(c.Message, sum) {
				return v.Status.RestoreRequired, nil
			}
		}
		return false, nil
	})
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	time.Sleep(3 * time.Second)
	if got := e.Call(t, "GET", "/v1/volumes/copy", "").Expect(t, 200); got.Body["state"] == "attached" {
		t.Fatal("a volume whose restore failed attached")
	}
}
