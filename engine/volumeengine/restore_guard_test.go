package volumeengine

import (
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
	err := live.Restore(store, "vol", "b1")
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "frontend") {
		t.Fatalf("restore onto an attached volume: %v, want ErrPrecondition naming the frontend", err)
	}

	withHistory, _ := newEngine(t, 2)
	if _, err := withHistory.CreateSnapshot("mine", nil); err != nil {
		t.Fatal(err)
	}
	err = withHistory.Restore(store, "vol", "b1")
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
	if err := fresh.Restore(store, "vol", "b1"); err != nil {
		t.Fatalf("restore into a new volume: %v", err)
	}
	// And again, as a retried restore of the same volume would.
	if err := fresh.Restore(store, "vol", "b1"); err != nil {
		t.Fatalf("a retried restore: %v", err)
	}
}
