package volumeengine

import (
	"fmt"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// TestTheEnginesBackupRecordsAreBounded: an engine keeps a record of each
// backup it ran, which the manager mirrors into the Engine object; the
// finished ones beyond the newest maxFinishedBackups go, oldest first, so
// a volume backed up every few minutes for months never makes an object
// near etcd's size limit. The newest finished ones stay, for the backup
// controller to read their outcome.
func TestTheEnginesBackupRecordsAreBounded(t *testing.T) {
	e, _ := newEngine(t, 1)
	if _, err := e.WriteAt(random(5, 4096), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := maxFinishedBackups + 5
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("b%02d", i)
		if err := e.StartBackup(name, "s1", store, nil); err != nil {
			t.Fatal(err)
		}
		if st := waitBackup(t, e, name); st.State != BackupStateCompleted {
			t.Fatalf("backup %s: %+v", name, st)
		}
	}
	got := e.BackupStatuses()
	if len(got) != maxFinishedBackups {
		t.Fatalf("%d backup records after %d backups, want %d", len(got), n, maxFinishedBackups)
	}
	for i := n - maxFinishedBackups; i < n; i++ {
		if _, ok := got[fmt.Sprintf("b%02d", i)]; !ok {
			t.Errorf("the record of backup b%02d, one of the newest, is gone", i)
		}
	}
}
