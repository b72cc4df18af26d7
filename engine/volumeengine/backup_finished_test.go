package volumeengine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// A backup's end, completed or failed, is counted before the engine says
// it changed, and the status read after the count holds the end: the
// manager mirrors it at once on that count (controller/volume,
// engineMirrors.backupEnded).
func TestABackupsEndIsCountedBeforeTheChangeIsSaid(t *testing.T) {
	e, _ := newEngine(t, 1)
	type seen struct {
		finished uint64
		state    string
	}
	changes := make(chan seen, 16)
	e.OnChange(func() {
		// The count first, then the status, as the mirror reads them.
		n := e.BackupsFinished()
		changes <- seen{n, e.Status().Backups[fmt.Sprintf("b%d", n)].State}
	})
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	good, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// A target that cannot be written: a folder under a file.
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := backupstore.Open("file://" + file + "/backups")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		store *backupstore.Store
		want  string
	}{{good, BackupStateCompleted}, {bad, BackupStateError}} {
		name := fmt.Sprintf("b%d", i+1)
		if n := e.BackupsFinished(); n != uint64(i) {
			t.Fatalf("before backup %s the engine counts %d ended, want %d", name, n, i)
		}
		if err := e.StartBackup(name, "s1", c.store, nil); err != nil {
			t.Fatal(err)
		}
		for deadline := time.After(30 * time.Second); ; {
			select {
			case s := <-changes:
				if s.finished != uint64(i+1) {
					continue // another change (the snapshot's)
				}
				if s.state != c.want {
					t.Fatalf("backup %s counted ended with its status %q, want %q", name, s.state, c.want)
				}
			case <-deadline:
				t.Fatalf("backup %s: no change said with it counted", name)
			}
			break
		}
	}
}
