package volumeengine

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// openEngine opens the replicas in dirs (name to folder) and starts an
// engine on them, as the node does at each attach.
func openEngine(t *testing.T, dirs map[string]string) *Engine {
	t.Helper()
	replicas := map[string]*replica.Replica{}
	for name, dir := range dirs {
		r, err := replica.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		replicas[name] = r
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := New("vol", replicas, clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// createReplicas makes n empty replicas, a, b, ..., and returns their
// folders.
func createReplicas(t *testing.T, n int) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for i := 0; i < n; i++ {
		name := string(rune('a' + i))
		dirs[name] = filepath.Join(t.TempDir(), name)
		r, err := replica.Create(dirs[name], size)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	return dirs
}

// failReplica makes every later I/O of the engine's replica fail, as a
// disk that went away does.
func failReplica(e *Engine, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range e.replicas {
		if m.name == name {
			m.r.Close()
		}
	}
}

// A replica that failed while the engine ran missed the writes that
// followed: the next engine on the same replicas never takes it back as
// RW. Before, it came back RW and, first by name, served its old data.
func TestAFailedReplicaIsNotHealthyAtTheNextStart(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	old, acked := random(11, 64<<10), random(12, 64<<10)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	failReplica(e, "a")
	if _, err := e.WriteAt(acked, 0); err != nil {
		t.Fatalf("a write with one healthy replica: %v", err)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes %v, want a:ERR b:RW", modes)
	}
	if why := e.ReplicaFailures()["a"]; why.Behind || !strings.Contains(why.Why, "closed") {
		t.Errorf("why a failed: %+v, want its I/O error", why)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	e.Close()

	e = openEngine(t, dirs)
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes at the next start %v, want a:ERR b:RW (a missed acknowledged writes)", modes)
	}
	if why := e.ReplicaFailures()["a"]; !why.Behind || !strings.Contains(why.Why, "behind replica b") {
		t.Errorf("why a is not used: %+v, want it to say its data is behind b's", why)
	}
	got := make([]byte, len(acked))
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, acked) {
		t.Fatalf("the volume reads the failed replica's old data (%v)", err)
	}
	// And at the start after that too: nothing healed a.
	e.Close()
	e = openEngine(t, dirs)
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes at the third start %v", modes)
	}
}

// When every replica fails, the last one to fail holds every write that
// was acknowledged: the next engine opens it, and not the older one.
func TestTheLastReplicaToFailIsTheOneKept(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	acked := random(13, 64<<10)
	failReplica(e, "a")
	if _, err := e.WriteAt(acked, 0); err != nil {
		t.Fatal(err)
	}
	failReplica(e, "b")
	if _, err := e.WriteAt(random(14, 4096), 0); !errors.Is(err, ErrNoHealthyReplica) {
		t.Fatalf("a write with no replica left: %v", err)
	}
	e.Close()

	e = openEngine(t, dirs)
	if modes := e.ReplicaModes(); modes["a"] != ModeERR || modes["b"] != ModeRW {
		t.Fatalf("modes %v, want a:ERR b:RW", modes)
	}
	got := make([]byte, len(acked))
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, acked) {
		t.Fatalf("the volume does not read its last acknowledged write (%v)", err)
	}
}

// A replica named by Behind (created empty beside replicas that hold
// data) starts ERR, whatever its epoch, and says why.
func TestABehindReplicaStartsERR(t *testing.T) {
	dirs := createReplicas(t, 2)
	e := openEngine(t, dirs)
	data := random(15, 64<<10)
	if _, err := e.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	e.Close()
	replicas := map[string]*replica.Replica{}
	for name, dir := range dirs {
		r, err := replica.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		replicas[name] = r
	}
	// "0" sorts first: reads would go to it.
	fresh, err := replica.Create(filepath.Join(t.TempDir(), "0"), size)
	if err != nil {
		t.Fatal(err)
	}
	replicas["0"] = fresh
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err = New("vol", replicas, clocktesting.NewFakeClock(time.Now()), logrus.NewEntry(log), Behind("0", "it was created empty"))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if modes := e.ReplicaModes(); modes["0"] != ModeERR || modes["a"] != ModeRW || modes["b"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}
	if why := e.ReplicaFailures()["0"]; why != (Failure{Behind: true, Why: "it was created empty"}) {
		t.Errorf("why 0 is not used: %+v", why)
	}
	got := make([]byte, len(data))
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %v", err)
	}
	// With only replicas that are behind, no engine starts.
	only, err := replica.Create(filepath.Join(t.TempDir(), "c"), size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New("vol2", map[string]*replica.Replica{"c": only}, clocktesting.NewFakeClock(time.Now()), logrus.NewEntry(log), Behind("c", "test")); !errors.Is(err, ErrNoHealthyReplica) {
		t.Fatalf("an engine on replicas that are all behind: %v", err)
	}
	only.Close()
}
