package volumeengine

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// TestIncrementalBaseSurvivesSnapshotNameReuse: the base of an incremental
// backup is the very snapshot the last backup was taken from, not any
// snapshot that has its name. Here s1 is backed up, merged into its child
// by a purge, and a new s1 is taken: the next backup must still hold what
// was written between the two (it did not: restoring it lost X).
func TestIncrementalBaseSurvivesSnapshotNameReuse(t *testing.T) {
	e, _ := newEngine(t, 1)
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	backup := func(name, snapshot string) {
		t.Helper()
		if err := e.StartBackup(name, snapshot, store, nil); err != nil {
			t.Fatal(err)
		}
		if st := waitBackup(t, e, name); st.State != BackupStateCompleted {
			t.Fatalf("backup %s: %+v", name, st)
		}
	}
	snapshot := func(name string) {
		t.Helper()
		if _, err := e.CreateSnapshot(name, nil); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := e.WriteAt(bytes.Repeat([]byte("A"), 4096), 0); err != nil {
		t.Fatal(err)
	}
	snapshot("s1")
	backup("b1", "s1")
	if _, err := e.WriteAt(bytes.Repeat([]byte("X"), 4096), 3<<20); err != nil {
		t.Fatal(err)
	}
	snapshot("y")
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	e.StartPurge()
	waitPurge(t, e)
	if _, err := e.Snapshot("s1"); err == nil {
		t.Fatal("s1 is still there after the purge; the test needs it merged into y")
	}
	snapshot("s1")
	snapshot("s2")
	backup("b2", "s2")

	want := make([]byte, size)
	if _, err := e.ReadAt(want, 0); err != nil {
		t.Fatal(err)
	}
	restored, _ := newEngine(t, 1)
	if err := restored.Restore(context.Background(), store, "vol", "b2"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := restored.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("a restore of b2 reads %q at 3 MiB, want %q: the backup took the new s1 for the old one", got[3<<20:3<<20+8], want[3<<20:3<<20+8])
	}
}

// readCounter is a file:// driver counting reads of backup configs and
// writes of blocks.
type readCounter struct {
	backupstore.Driver
	configReads, blockWrites atomic.Int32
}

func (d *readCounter) Read(key string, limit int64) ([]byte, error) {
	if strings.Contains(key, "/backups/backup_") {
		d.configReads.Add(1)
	}
	return d.Driver.Read(key, limit)
}

func (d *readCounter) Write(key string, data []byte) error {
	if strings.HasSuffix(key, ".blk") {
		d.blockWrites.Add(1)
	}
	return d.Driver.Write(key, data)
}

// TestIncrementalBackupReadsTheLastBackupOnce: the engine and the store
// both needed the last backup; the store reads it once, under the
// volume's lock, and the backup stores only the block that changed.
func TestIncrementalBackupReadsTheLastBackupOnce(t *testing.T) {
	e, _ := newEngine(t, 1)
	root := t.TempDir()
	d := &readCounter{Driver: &backupstore.FileDriver{Root: root}}
	store := backupstore.NewStore("file://"+root, d)
	for i, name := range []string{"b1", "b2"} {
		if _, err := e.WriteAt(bytes.Repeat([]byte{byte('a' + i)}, 4096), int64(i)<<20); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateSnapshot("s"+name, nil); err != nil {
			t.Fatal(err)
		}
		d.configReads.Store(0)
		d.blockWrites.Store(0)
		if err := e.StartBackup(name, "s"+name, store, nil); err != nil {
			t.Fatal(err)
		}
		if st := waitBackup(t, e, name); st.State != BackupStateCompleted {
			t.Fatalf("backup %s: %+v", name, st)
		}
	}
	if n := d.configReads.Load(); n != 1 {
		t.Errorf("the incremental backup read backup configs %d times, want once", n)
	}
	if n := d.blockWrites.Load(); n != 1 {
		t.Errorf("the incremental backup stored %d blocks, want the one that changed", n)
	}
}
