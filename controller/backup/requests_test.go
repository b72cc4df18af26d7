package backup

import (
	"context"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestTargetRequestsAtARealS3Server counts what the controller sends to
// versitygw: nothing for an Engine change that is not a finished backup
// (snapshots, an attach, a backup's progress), and for a finished backup
// the listing of its own volume, its config and the volume's record.
func TestTargetRequestsAtARealS3Server(t *testing.T) {
	f, counter, engines, direct := s3Target(t, 4, 1)
	f.poll(t)
	if got := counter.Count(); got != 1+4*3 {
		t.Errorf("first poll: %d requests, want 13 (the volumes' listing, then per volume its backups' listing, config and record)", got)
	}
	counter.Reset()

	// Snapshots, an attach, a backup starting and progressing.
	for round := 0; round < 3; round++ {
		for i, e := range engines {
			engines[i] = f.snapshot(t, e, fmt.Sprintf("snap-%d", round))
		}
		f.drain(t)
	}
	attached := engines[0].DeepCopy()
	attached.Status.CurrentState = longhorn.InstanceStateRunning
	attached.Status.Endpoint = "nbd://127.0.0.1:1234"
	f.cache(t, attached)
	f.c.enqueueEngine(engines[0], attached)
	running := engines[1].DeepCopy()
	running.Status.BackupStatus["backup-new"] = &longhorn.EngineBackupStatus{State: "InProgress", Progress: 20, SnapshotName: "snap-2"}
	f.cache(t, running)
	f.c.enqueueEngine(engines[1], running)
	further := running.DeepCopy()
	further.Status.BackupStatus["backup-new"] = &longhorn.EngineBackupStatus{State: "InProgress", Progress: 70, SnapshotName: "snap-2"}
	f.cache(t, further)
	f.c.enqueueEngine(running, further)
	f.drain(t)
	if got := counter.Requests(); len(got) != 0 {
		t.Fatalf("engine changes that are not a finished backup sent %d requests to the target: %v", len(got), got)
	}
	if b, err := f.lh.LonghornV1beta2().Backups("ns").Get(context.Background(), "backup-new", metav1.GetOptions{}); err != nil || b.Status.Progress != 70 {
		t.Fatalf("the running backup's object: %+v, %v", b, err)
	}

	// The backup finishes: its volume alone is read.
	if _, _, err := direct.Backup(backupstore.BackupRequest{Name: "backup-new", Volume: "vol-001", Snapshot: "snap-2", Source: &byteSource{[]byte("new")}}); err != nil {
		t.Fatal(err)
	}
	done := further.DeepCopy()
	done.Status.BackupStatus["backup-new"] = &longhorn.EngineBackupStatus{State: backupStateCompleted, Progress: 100, SnapshotName: "snap-2"}
	f.cache(t, done)
	f.c.enqueueEngine(further, done)
	f.drain(t)
	var got []string
	for _, r := range counter.Requests() {
		got = append(got, r.Kind+" "+r.Key)
	}
	prefix := f.path + "/backupstore/volumes/vol-001/"
	want := []string{"LIST " + prefix + "backups/", "GET " + prefix + "backups/backup_backup-new.cfg", "GET " + prefix + "volume.cfg"}
	if !slices.Equal(got, want) {
		t.Fatalf("a finished backup sent %v, want %v", got, want)
	}
	if b, err := f.lh.LonghornV1beta2().Backups("ns").Get(context.Background(), "backup-new", metav1.GetOptions{}); err != nil || b.Status.State != longhorn.BackupStateCompleted {
		t.Fatalf("the finished backup's object: %+v, %v", b, err)
	}
}
