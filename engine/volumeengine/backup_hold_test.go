package volumeengine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// pausingDriver stops the backup at its first block: its Exists waits
// until resume is closed, after telling paused. The driver lists nothing
// in one go, so a backup asks Exists of every block it stores.
type pausingDriver struct {
	backupstore.Driver
	once    sync.Once
	paused  chan struct{}
	resume  chan struct{}
	blocked bool
}

func newPausingDriver(root string) *pausingDriver {
	return &pausingDriver{Driver: &backupstore.FileDriver{Root: root}, paused: make(chan struct{}), resume: make(chan struct{})}
}

func (d *pausingDriver) Exists(key string) (bool, error) {
	if strings.Contains(key, "/blocks/") {
		d.once.Do(func() {
			close(d.paused)
			<-d.resume
		})
	}
	return d.Driver.Exists(key)
}

// backedUpDigest is the digest a backup of a volume of data records: that
// of a backup of a fresh volume holding data alone.
func backedUpDigest(t *testing.T, data []byte) string {
	t.Helper()
	e := newNamedEngine(t, "reference", 1, int64(len(data)))
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s", nil); err != nil {
		t.Fatal(err)
	}
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartBackup("ref", "s", store, nil); err != nil {
		t.Fatal(err)
	}
	if st := waitBackup(t, e, "ref"); st.State != BackupStateCompleted {
		t.Fatalf("reference backup: %+v", st)
	}
	info, err := store.Get("reference", "ref")
	if err != nil {
		t.Fatal(err)
	}
	return info.SnapshotDigest
}

// The sequence of issue 45: a backup of s starts and is paused mid-read
// (its first block in flight, the last ones not read yet); s is deleted;
// a trim of the whole volume comes (a discard mount, fstrim, the
// filesystem-trim job: all reach Engine.Trim) before any purge; the
// backup resumes. The backup holds s as an export does: the delete is
// refused while it reads, saying so, and the trim leaves s alone. The
// backup stores what was written, its digest that of the data, a restore
// reads it back, and s may be deleted once the backup is done.
func TestABackupHoldsItsSnapshotAgainstDeleteAndTrim(t *testing.T) {
	const volSize = 8 << 20 // four backup blocks
	data := random(45, volSize)
	e := newNamedEngine(t, "vol", 2, volSize)
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s", nil); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	d := newPausingDriver(root)
	store := backupstore.NewStore("file://"+root, d)
	if err := store.SetBackupDefaults("", 1); err != nil {
		t.Fatal(err)
	}
	if err := e.StartBackup("b", "s", store, nil); err != nil {
		t.Fatal(err)
	}
	<-d.paused

	err := e.DeleteSnapshot("s")
	var held *HeldError
	if !errors.As(err, &held) || !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "backup b") {
		t.Errorf("a delete of s while backup b reads it: %v, want a HeldError naming the backup", err)
	}
	if err := e.Trim(0, volSize); err != nil {
		close(d.resume)
		t.Fatal(err)
	}
	close(d.resume)
	if st := waitBackup(t, e, "b"); st.State != BackupStateCompleted {
		t.Fatalf("backup b: %+v", st)
	}

	info, err := store.Get("vol", "b")
	if err != nil {
		t.Fatal(err)
	}
	if want := backedUpDigest(t, data); info.SnapshotDigest != want {
		t.Errorf("backup b's digest is %s, want %s (that of the data written): it stored %d of 4 blocks", info.SnapshotDigest, want, len(info.Blocks))
	}
	restored := newNamedEngine(t, "restored", 1, volSize)
	if err := restored.Restore(context.Background(), store, "vol", "b"); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, restored, volSize); !bytes.Equal(got, data) {
		t.Error("a restore of backup b does not read the data written")
	}
	if err := e.DeleteSnapshot("s"); err != nil {
		t.Fatalf("a delete of s once the backup is done: %v", err)
	}
}

// A backup of a snapshot already deleted (marked removed) is refused, as
// an export's read of one is: a purge may merge it away, a trim punch it.
func TestABackupOfADeletedSnapshotIsRefused(t *testing.T) {
	e := newNamedEngine(t, "vol", 1, size)
	if _, err := e.CreateSnapshot("s", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteSnapshot("s"); err != nil {
		t.Fatal(err)
	}
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	err = e.StartBackup("b", "s", store, nil)
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("a backup of a deleted snapshot: %v, want ErrPrecondition saying it is deleted", err)
	}
	if _, ok := e.BackupStatuses()["b"]; ok {
		t.Error("a refused backup has a status")
	}
}

// A view a replica has open on a removed snapshot, which no hold of the
// engine covers, keeps that snapshot from a trim on every replica, so
// the replicas read the same after it.
func TestATrimKeepsWhatAnyReplicaViewsOnEveryReplica(t *testing.T) {
	e, replicas := newEngine(t, 2)
	data := random(46, size)
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(random(47, size), 0); err != nil {
		t.Fatal(err)
	}
	v, err := replicas["b"].OpenSnapshot("s")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := e.DeleteSnapshot("s"); err != nil {
		t.Fatal(err)
	}
	if err := e.Trim(0, size); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, v, size); !bytes.Equal(got, data) {
		t.Error("the open view of s does not read what s held after the trim")
	}
	for name, r := range replicas {
		if got := readAll(t, r, size); !bytes.Equal(got, data) {
			t.Errorf("replica %s does not read s's data where the head was trimmed: the replicas differ", name)
		}
	}
}
