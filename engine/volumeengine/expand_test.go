package volumeengine

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// A volume grown with data on it: the old data reads back, the new space
// reads as zeros and takes writes, every replica has the new size, and an
// engine started again on the same replicas (a restart) has it too.
func TestExpandGrowsEveryReplicaAndSurvivesARestart(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	old := random(1, size)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("small", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Expand(size / 2); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "size") {
		t.Fatalf("shrinking: %v, want ErrInvalid naming the size", err)
	}
	if err := e.Expand(size + 1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a size off the block size: %v, want ErrInvalid", err)
	}
	if err := e.Expand(3 * size); err != nil {
		t.Fatal(err)
	}
	if err := e.Expand(3 * size); err != nil {
		t.Fatalf("expanding again to the same size: %v", err)
	}
	if e.Size() != 3*size {
		t.Fatalf("engine size %d, want %d", e.Size(), 3*size)
	}
	got := make([]byte, 3*size)
	if _, err := e.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:size], old) || !bytes.Equal(got[size:], make([]byte, 2*size)) {
		t.Fatal("after expanding: not the old data then zeros")
	}
	tail := random(2, 1<<20)
	if _, err := e.WriteAt(tail, 3*size-int64(len(tail))); err != nil {
		t.Fatalf("a write into the new space: %v", err)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	e.Close()

	for name, dir := range dirs {
		if n, err := replica.ReadSize(dir); err != nil || n != 3*size {
			t.Fatalf("replica %s is %d bytes on disk (%v)", name, n, err)
		}
	}
	again := openEngine(t, dirs)
	if again.Size() != 3*size {
		t.Fatalf("restarted at %d bytes", again.Size())
	}
	if _, err := again.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:size], old) || !bytes.Equal(got[3*size-int64(len(tail)):], tail) || !bytes.Equal(got[size:3*size-int64(len(tail))], make([]byte, 2*size-len(tail))) {
		t.Fatal("restarted: not the old data, zeros and the write into the new space")
	}
	for name, mode := range again.ReplicaModes() {
		if mode != ModeRW {
			t.Fatalf("replica %s is %s after the restart", name, mode)
		}
	}
}

// An expansion cut short between two replicas (one grown, one not, the
// same epoch) is completed by the next engine: both are RW at the larger
// size, and the new space reads as zeros on both.
func TestAnExpansionCutShortIsCompletedAtTheNextStart(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	old := random(3, size)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	e.Close()
	r, err := replica.Open(dirs["a"])
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Grow(2 * size); err != nil {
		t.Fatal(err)
	}
	r.Close()

	again := openEngine(t, dirs)
	if again.Size() != 2*size {
		t.Fatalf("engine at %d bytes, want the grown replica's %d", again.Size(), 2*size)
	}
	for name, dir := range dirs {
		if n, _ := replica.ReadSize(dir); n != 2*size {
			t.Fatalf("replica %s left at %d bytes", name, n)
		}
		if mode := again.ReplicaModes()[name]; mode != ModeRW {
			t.Fatalf("replica %s is %s", name, mode)
		}
	}
	// Each replica alone reads the old data and zeros.
	again.Close()
	for name := range dirs {
		one := openEngine(t, map[string]string{name: dirs[name]})
		got := make([]byte, 2*size)
		if _, err := one.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:size], old) || !bytes.Equal(got[size:], make([]byte, size)) {
			t.Fatalf("replica %s: not the old data then zeros", name)
		}
		one.Close()
	}
}

// A replica that failed before the expansion keeps its old size, is
// behind the others by its epoch, and stays ERR: the engine opens at the
// size of the current replicas.
func TestAFailedReplicaOfAnotherSizeStaysOut(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	failReplica(e, "b")
	if _, err := e.WriteAt([]byte("after b failed"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Expand(2 * size); err != nil {
		t.Fatal(err)
	}
	e.Close()
	again := openEngine(t, dirs)
	if again.Size() != 2*size {
		t.Fatalf("engine at %d bytes", again.Size())
	}
	if modes := again.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeERR {
		t.Fatalf("modes %v: want a RW, b ERR", modes)
	}
	if n, _ := replica.ReadSize(dirs["b"]); n != size {
		t.Fatalf("the failed replica was grown to %d", n)
	}
}

// A backup of a grown volume records the new size; a backup taken before
// the growth keeps the old one, and restores into a volume of that size.
func TestBackupsBeforeAndAfterAnExpansion(t *testing.T) {
	e, _ := newEngine(t, 1)
	old := random(4, size)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("small", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Expand(2 * size); err != nil {
		t.Fatal(err)
	}
	tail := random(5, 4096)
	if _, err := e.WriteAt(tail, 2*size-4096); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("large", nil); err != nil {
		t.Fatal(err)
	}
	store, err := backupstore.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ name, snapshot string }{{"b-small", "small"}, {"b-large", "large"}} {
		if err := e.StartBackup(b.name, b.snapshot, store, nil); err != nil {
			t.Fatal(err)
		}
		if st := waitBackup(t, e, b.name); st.State != BackupStateCompleted {
			t.Fatalf("backup %s: %+v", b.name, st)
		}
	}
	for name, want := range map[string]int64{"b-small": size, "b-large": 2 * size} {
		info, err := store.Get("vol", name)
		if err != nil {
			t.Fatal(err)
		}
		if info.VolumeSize != want {
			t.Fatalf("backup %s records %d bytes, want %d", name, info.VolumeSize, want)
		}
	}
	restored, _ := newEngine(t, 1) // a volume of the old size
	if err := restored.Restore(context.Background(), store, "vol", "b-small"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if _, err := restored.ReadAt(got, 0); err != nil || !bytes.Equal(got, old) {
		t.Fatalf("the backup taken before the growth restores other data (%v)", err)
	}
}
