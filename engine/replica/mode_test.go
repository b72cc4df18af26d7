package replica

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A replica's folder and files are the manager's alone: another user of
// the node, or a pod that mounts the disk read-only for another purpose,
// reads none of a volume's data.
func TestAReplicasDataIsReadableByItsOwnerOnly(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "replica")
	r, err := Create(dir, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("folder %v, %v: want 0700", st.Mode().Perm(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s is %v: readable by others", e.Name(), perm)
		}
	}
}
