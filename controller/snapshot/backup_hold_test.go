package snapshot

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// stallingDriver holds a backup at its first block until resume closes.
type stallingDriver struct {
	backupstore.Driver
	once            sync.Once
	stalled, resume chan struct{}
}

func (d *stallingDriver) Exists(key string) (bool, error) {
	if strings.Contains(key, "/blocks/") {
		d.once.Do(func() {
			close(d.stalled)
			<-d.resume
		})
	}
	return d.Driver.Exists(key)
}

// A Snapshot object deleted while a backup of it runs (the UI, a
// snapshot-delete job, a VolumeSnapshot's deletion) waits, no failure:
// its status says the backup reads it, the snapshot stays whole in the
// engine, and the deletion goes ahead once the backup is done.
func TestADeletionWaitsForTheBackupThatReadsTheSnapshot(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	dir := t.TempDir() // made first: its removal runs after the engines stop
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Now()), logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.WriteAt([]byte("data to back up"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("backed", nil); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	d := &stallingDriver{Driver: &backupstore.FileDriver{Root: root}, stalled: make(chan struct{}), resume: make(chan struct{})}
	if err := run.Engine.StartBackup("b1", "backed", backupstore.NewStore("file://"+root, d), nil); err != nil {
		t.Fatal(err)
	}
	<-d.stalled
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			close(d.resume)
		}
	}
	defer resume()

	now := metav1.Now()
	snap := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "backed", Namespace: "ns", DeletionTimestamp: &now,
		Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}},
		Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true}, Status: longhorn.SnapshotStatus{CreationTime: "2026-11-26T00:00:00Z"}}
	c, lh, lhi := deletionEnv(t, log, instances, snap)

	res, err := c.sync(context.Background(), "ns/backed")
	if err != nil {
		t.Fatalf("a deletion a backup holds is no failure, got %v", err)
	}
	if res.RequeueAfter != deletionRecheck {
		t.Errorf("a deletion a backup holds looks again after %v, want %v", res.RequeueAfter, deletionRecheck)
	}
	got, err := lh.LonghornV1beta2().Snapshots("ns").Get(context.Background(), "backed", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Status.Error, "the deletion waits") || !strings.Contains(got.Status.Error, "is being read by backup b1") {
		t.Errorf("status.error %q, want that backup b1 reads the snapshot", got.Status.Error)
	}
	if s, err := run.Engine.Snapshot("backed"); err != nil || s.Removed {
		t.Fatalf("the snapshot a backup reads was marked removed: %+v, %v", s, err)
	}

	resume()
	for deadline := time.Now().Add(30 * time.Second); run.Engine.BackupStatuses()["b1"].State == volumeengine.BackupStateInProgress; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("backup b1 did not finish")
		}
	}
	if st := run.Engine.BackupStatuses()["b1"]; st.State != volumeengine.BackupStateCompleted {
		t.Fatalf("backup b1: %+v", st)
	}
	if err := lhi.Snapshots().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sync(context.Background(), "ns/backed"); err != nil {
		t.Fatal(err)
	}
	if s, err := run.Engine.Snapshot("backed"); err == nil && !s.Removed {
		t.Errorf("the snapshot is not marked removed once the backup was done: %+v", s)
	}
}
