package controller

import (
	"bytes"
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
	if err := restored.Restore(store, "vol", "b2"); err != nil {
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
