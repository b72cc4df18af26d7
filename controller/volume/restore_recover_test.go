package volume

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A restore that panics (here on a backup whose block has an empty
// checksum, issue 16's defect 3) is the volume's restore error: the engine
// started for it stops, and the sync returns the error (the caller puts it
// on the Volume's Restore condition) instead of taking the daemon down.
func TestAPanickingRestoreIsTheVolumesError(t *testing.T) {
	target := malformedBackupTarget(t)
	const size = 4 << 20
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	dir := t.TempDir() // made first: its removal runs after the engines stop
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	c := &Controller{instances: instance.Local(instances)}
	c.Base = kit.NewBase("test", logrus.NewEntry(log), nil, nil)
	defer c.Queue.ShutDown()
	v := &longhorn.Volume{Spec: longhorn.VolumeSpec{Size: size, FromBackup: "file://" + target + "?backup=b1&volume=vol", NumberOfReplicas: 1}}
	v.Name = "vol"
	err := c.restore(context.Background(), v, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}})
	if err == nil || !strings.Contains(err.Error(), "restore volume vol from") {
		t.Fatalf("restore of a malformed backup: %v, want the volume's restore error", err)
	}
	if _, running := instances.Get("vol"); running {
		t.Fatal("the engine started for the failed restore is still running")
	}
}

// A restore that fails is not started again at each sync (each would read
// the backup from its target again): its error stands until the retry is
// due, 2 s after the first failure, then 4 s after the second.
func TestAFailedRestoreWaitsOutItsBackoff(t *testing.T) {
	target := malformedBackupTarget(t)
	dir := t.TempDir()
	env := newSyncEnv(t)
	c := env.c
	clk := c.clock.(*clocktesting.FakeClock)
	v := &longhorn.Volume{Spec: longhorn.VolumeSpec{Size: 4 << 20, FromBackup: "file://" + target + "?backup=b1&volume=vol", NumberOfReplicas: 1}}
	v.Name = "vol"
	dirs := []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}
	// ends syncs until the run started ends, and returns its error.
	ends := func() error {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if running, err := c.syncRestore(v, dirs); !running {
				return err
			}
		}
		t.Fatal("the restore did not end")
		return nil
	}
	run := func() *restoreRun {
		c.restores.mu.Lock()
		defer c.restores.mu.Unlock()
		return c.restores.runs["vol"]
	}
	if running, err := c.syncRestore(v, dirs); !running || err != nil {
		t.Fatalf("the first sync: running %v, %v; want the restore started", running, err)
	}
	first := ends()
	if first == nil {
		t.Fatal("the restore of a malformed backup succeeded")
	}
	failed := run()
	for _, step := range []time.Duration{0, time.Second, 900 * time.Millisecond} {
		clk.Step(step)
		if running, err := c.syncRestore(v, dirs); running || err == nil || err.Error() != first.Error() || run() != failed {
			t.Fatalf("a sync %v before the retry is due: running %v, %v; want the same error, no new run", 2*time.Second-clk.Since(syncNow), running, err)
		}
	}
	clk.Step(100 * time.Millisecond)
	if running, _ := c.syncRestore(v, dirs); !running || run() == failed {
		t.Fatal("the sync once the retry is due did not start the restore again")
	}
	if ends() == nil || run().attempts != 2 || run().retryAt.Sub(clk.Now()) != 4*time.Second {
		t.Fatalf("after the second failure: %d attempts, retry in %v; want 2 and 4s", run().attempts, run().retryAt.Sub(clk.Now()))
	}
}

// malformedBackupTarget is a file target whose backup b1 of volume vol
// has a block with an empty checksum.
func malformedBackupTarget(t *testing.T) string {
	t.Helper()
	target := t.TempDir()
	for name, content := range map[string]string{
		"backupstore/volumes/vol/volume.cfg":            `{"name":"vol","size":4194304,"lastBackupName":"b1"}`,
		"backupstore/volumes/vol/backups/backup_b1.cfg": `{"name":"b1","volumeName":"vol","volumeSize":4194304,"blocks":[{"offset":0,"checksum":""}]}`,
	} {
		path := filepath.Join(target, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return target
}
