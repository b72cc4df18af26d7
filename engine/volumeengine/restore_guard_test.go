package volumeengine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// backedUp is a store holding backup b1 of volume vol.
func backedUp(t *testing.T) *backupstore.Store {
	t.Helper()
	src, _ := newEngine(t, 1)
	if _, err := src.WriteAt(random(3, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := src.StartBackup("b1", "s1", store, nil); err != nil {
		t.Fatal(err)
	}
	if st := waitBackup(t, src, "b1"); st.State != BackupStateCompleted {
		t.Fatalf("backup: %+v", st)
	}
	return store
}

// A restore writes over the whole volume: it is allowed only into a volume
// being restored, one with no frontend and no snapshots, never over a
// live volume's data.
func TestRestoreOnlyIntoAVolumeBeingRestored(t *testing.T) {
	store := backedUp(t)

	live, _ := newEngine(t, 2)
	live.SetFrontend(true)
	if _, err := live.WriteAt([]byte("precious"), 0); err != nil {
		t.Fatal(err)
	}
	err := live.Restore(context.Background(), store, "vol", "b1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "frontend") {
		t.Fatalf("restore onto an attached volume: %v, want ErrPrecondition naming the frontend", err)
	}

	withHistory, _ := newEngine(t, 2)
	if _, err := withHistory.CreateSnapshot("mine", nil); err != nil {
		t.Fatal(err)
	}
	err = withHistory.Restore(context.Background(), store, "vol", "b1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "snapshot") {
		t.Fatalf("restore onto a volume with snapshots: %v, want ErrPrecondition naming its snapshots", err)
	}
	got := make([]byte, 8)
	if _, err := live.ReadAt(got, 0); err != nil || string(got) != "precious" {
		t.Fatalf("the refused restore touched the live volume: %q %v", got, err)
	}
	if st := live.RestoreStatus(); st.IsRestoring || st.BackupURL != "" {
		t.Fatalf("a refused restore shows in the status: %+v", st)
	}

	fresh, _ := newEngine(t, 2)
	if err := fresh.Restore(context.Background(), store, "vol", "b1"); err != nil {
		t.Fatalf("restore into a new volume: %v", err)
	}
	// And again, as a retried restore of the same volume would.
	if err := fresh.Restore(context.Background(), store, "vol", "b1"); err != nil {
		t.Fatalf("a retried restore: %v", err)
	}
}

// A restore whose context ends stops, as an error its status shows, and
// writes nothing more; the same restore runs again to the end.
func TestRestoreStopsWhenCancelled(t *testing.T) {
	store := backedUp(t)
	e, _ := newEngine(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.Restore(ctx, store, "vol", "b1")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled restore: %v, want context.Canceled", err)
	}
	if st := e.RestoreStatus(); st.IsRestoring || st.State != "error" || !strings.Contains(st.Error, "restore stopped") {
		t.Fatalf("status after a cancelled restore: %+v", st)
	}
	got := make([]byte, 8)
	if _, err := e.ReadAt(got, 0); err != nil || string(got) != string(make([]byte, 8)) {
		t.Fatalf("a cancelled restore wrote: %q %v", got, err)
	}
	if err := e.Restore(context.Background(), store, "vol", "b1"); err != nil {
		t.Fatalf("the restore again: %v", err)
	}
	if st := e.RestoreStatus(); st.State != "complete" || st.Progress != 100 || st.LastRestored != "b1" {
		t.Fatalf("status after the restore: %+v", st)
	}
}

// A volume being restored takes no snapshot: it would hold half the
// backup, and the restore, which must write into a volume with no
// snapshot, would then go on over a history.
func TestNoSnapshotWhileRestoring(t *testing.T) {
	e, _ := newEngine(t, 1)
	if err := e.startRestore("file:///t?backup=b1&volume=vol"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s1", nil); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "being restored") {
		t.Fatalf("a snapshot while restoring: %v, want ErrPrecondition", err)
	}
	e.setRestore(func(st *RestoreStatus) { st.IsRestoring = false })
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatalf("a snapshot after the restore: %v", err)
	}
}
