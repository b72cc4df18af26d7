package instance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/rpc"
)

func newTestEngines() *Engines {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	return NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, nil)
}

// An engine opens the replicas it is given; only a replica marked New is
// created. A replica whose folder is missing (another node's path, or
// data that vanished) fails the start, and nothing is created in its
// place.
func TestStartNeverCreatesAReplicaItOpens(t *testing.T) {
	m := newTestEngines()
	dir := filepath.Join(t.TempDir(), "replicas", "vol-r-0")
	const size = 1 << 20

	_, err := m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir}}, false)
	if err == nil || !strings.Contains(err.Error(), "vol-r-0") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("start on a missing replica: %v, want an error naming the replica and its folder", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the failed start left %s behind: %v", dir, err)
	}
	if _, running := m.Get("vol"); running {
		t.Fatal("an engine runs after a failed start")
	}

	// A new replica is created, and opened the next time without New.
	run, err := m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir, New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}
	run, err = m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir}}, false)
	if err != nil {
		t.Fatalf("open of an existing replica: %v", err)
	}
	buf := make([]byte, 4)
	if _, err := run.Engine.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}

	// New on a folder that holds the replica already (a crash between
	// creating it and recording so) opens it: its data is kept.
	run, err = m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir, New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("read %q, %v after a second New", buf, err)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}

	// The data vanishes: the start fails, it is not recreated empty.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir}}, false); err == nil {
		t.Fatal("an engine started on a replica whose data is gone")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the replica was recreated at %s: %v", dir, err)
	}
}
