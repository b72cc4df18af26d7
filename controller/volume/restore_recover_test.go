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
	target := t.TempDir()
	const size = 4 << 20
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
