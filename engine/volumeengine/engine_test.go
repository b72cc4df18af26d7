package volumeengine

import (
	"bytes"
	"errors"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/testfs"
)

const size = 4 << 20

func newEngine(t *testing.T, n int) (*Engine, map[string]*replica.Replica) {
	t.Helper()
	replicas := map[string]*replica.Replica{}
	for i := 0; i < n; i++ {
		r, err := replica.Create(filepath.Join(t.TempDir(), "r"), size)
		if err != nil {
			t.Fatal(err)
		}
		replicas[string(rune('a'+i))] = r
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := New("vol", replicas, clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, replicas
}

func random(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func TestWritesReachEveryReplica(t *testing.T) {
	e, replicas := newEngine(t, 3)
	data := random(1, 1<<20)
	if _, err := e.WriteAt(data, 4096*3+17); err != nil {
		t.Fatal(err)
	}
	for name, r := range replicas {
		got := make([]byte, len(data))
		if _, err := r.ReadAt(got, 4096*3+17); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("replica %s does not hold the write (%v)", name, err)
		}
	}
	if _, err := e.ReadAt(make([]byte, 10), size-5); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a read past the end: %v", err)
	}
}

func TestAFailedReplicaIsDroppedAndTheVolumeCarriesOn(t *testing.T) {
	e, replicas := newEngine(t, 2)
	replicas["a"].Close() // its files are closed: every I/O on it fails
	data := random(2, 8192)
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatalf("a write with one healthy replica left: %v", err)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}
	got := make([]byte, len(data))
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after failover: %v", err)
	}
}

func TestSnapshotsAcrossReplicas(t *testing.T) {
	e, replicas := newEngine(t, 2)
	first := random(3, size)
	e.WriteAt(first, 0)
	name, err := e.CreateSnapshot("", map[string]string{"RecurringJob": "daily"})
	if err != nil || name == "" {
		t.Fatalf("create with a generated name: %q, %v", name, err)
	}
	if _, err := e.CreateSnapshot(name, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a duplicate name: %v", err)
	}
	if _, err := e.CreateSnapshot("volume-head", nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("volume-head as a name: %v", err)
	}
	e.WriteAt(random(4, 4096), 0)
	if _, err := e.CreateSnapshot("s2", nil); err != nil {
		t.Fatal(err)
	}
	for rname, r := range replicas {
		list, _ := r.Snapshots()
		if len(list) != 3 || list[0].Name != name || list[1].Name != "s2" || list[0].Labels["RecurringJob"] != "daily" {
			t.Fatalf("replica %s snapshots %+v", rname, list)
		}
	}
	s, err := e.Snapshot(name)
	if err != nil || !s.UserCreated || s.Created != "2026-11-22T12:00:00Z" {
		t.Fatalf("get %+v, %v", s, err)
	}
	if _, err := e.Snapshot("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get missing: %v", err)
	}

	// Revert is refused while a frontend serves the volume.
	e.SetFrontend(true)
	if err := e.RevertSnapshot(name); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("revert with a frontend: %v", err)
	}
	e.SetFrontend(false)
	if err := e.RevertSnapshot(name); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	e.ReadAt(got, 0)
	if !bytes.Equal(got, first) {
		t.Fatal("after revert the volume does not read the snapshot")
	}

	// Delete marks removed; purge frees it in the background.
	if err := e.DeleteSnapshot("s2"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteSnapshot("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete missing: %v", err)
	}
	if err := e.DeleteSnapshot("volume-head"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete volume-head: %v", err)
	}
	e.StartPurge()
	deadline := time.Now().Add(10 * time.Second)
	for e.PurgeStatus().IsPurging && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := e.PurgeStatus(); st.State != "complete" || st.Progress != 100 {
		t.Fatalf("purge status %+v", st)
	}
	if _, err := e.Snapshot("s2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("s2 (a leaf after the revert) was not purged: %v", err)
	}
	e.ReadAt(got, 0)
	if !bytes.Equal(got, first) {
		t.Fatal("purge changed what the volume reads")
	}
}

func TestAFullDiskFailsOnlyItsReplica(t *testing.T) {
	full := testfs.Tmpfs(t, "1m")
	small, err := replica.Create(filepath.Join(full, "a"), size)
	if err != nil {
		t.Fatal(err)
	}
	big, err := replica.Create(filepath.Join(t.TempDir(), "b"), size)
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := New("vol", map[string]*replica.Replica{"a": small, "b": big}, clocktesting.NewFakeClock(time.Now()), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	data := random(9, 2<<20)
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatalf("a write with one replica on a full disk: %v", err)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}
	got := make([]byte, len(data))
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the full disk: %v", err)
	}

	// With only the full disk, the write fails and says so.
	only, err := replica.Create(filepath.Join(testfs.Tmpfs(t, "1m"), "c"), size)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := New("vol2", map[string]*replica.Replica{"c": only}, clocktesting.NewFakeClock(time.Now()), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, err := e2.WriteAt(data, 0); !errors.Is(err, ErrNoHealthyReplica) {
		t.Fatalf("a write with every replica on a full disk: %v", err)
	}
}

// Close returns only after a running purge ended, and no purge starts on a
// closed engine: nothing touches a replica's files once its engine is
// closed (a test's temporary folder was removed under a purge).
func TestCloseWaitsForThePurgeAndStartsNoOther(t *testing.T) {
	e, _ := newEngine(t, 2)
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	e.StartPurge()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if st := e.PurgeStatus(); st.IsPurging {
		t.Fatalf("Close returned while the purge ran: %+v", st)
	}
	before := e.PurgeStatus()
	e.StartPurge()
	if st := e.PurgeStatus(); st != before {
		t.Fatalf("a closed engine started a purge: %+v, was %+v", st, before)
	}
}
