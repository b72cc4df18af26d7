package instance

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/testfs"
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

// failedReplicaEngines starts an engine on replicas a (on a tmpfs of 1 MiB)
// and b, writes old data, then fills a's disk with a write that only b
// takes: a fails (ERR) and b holds the acknowledged data.
func failedReplicaEngines(t *testing.T) (m *Engines, dirs []ReplicaDir, tmpfs string, acked []byte) {
	t.Helper()
	tmpfs = testfs.Tmpfs(t, "1m")
	m = newTestEngines()
	dirs = []ReplicaDir{{Name: "vol-r-0", Dir: filepath.Join(tmpfs, "vol-r-0"), New: true}, {Name: "vol-r-1", Dir: filepath.Join(t.TempDir(), "vol-r-1"), New: true}}
	const size = 4 << 20
	run, err := m.Start("vol", size, dirs, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.WriteAt(bytes.Repeat([]byte{0x11}, 256<<10), 0); err != nil {
		t.Fatal(err)
	}
	acked = bytes.Repeat([]byte{0x22}, 2<<20)
	if _, err := run.Engine.WriteAt(acked, 0); err != nil {
		t.Fatalf("a write with one replica on a full disk: %v", err)
	}
	if modes := run.Engine.ReplicaModes(); modes["vol-r-0"] != volumeengine.ModeERR || modes["vol-r-1"] != volumeengine.ModeRW {
		t.Fatalf("modes %v, want vol-r-0:ERR vol-r-1:RW", modes)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}
	for i := range dirs {
		dirs[i].New = false
	}
	return m, dirs, tmpfs, acked
}

// A replica that failed (its disk filled up) and whose disk then has room
// again is not taken back as RW at the next start: it missed writes the
// volume acknowledged. Before, the modes went from vol-r-0:ERR vol-r-1:RW
// to both RW, and reads (first replica by name) returned its old data.
func TestAFailedReplicaStaysFailedAcrossARestart(t *testing.T) {
	m, dirs, tmpfs, acked := failedReplicaEngines(t)
	testfs.Resize(t, tmpfs, "64m")
	run, err := m.Start("vol", 4<<20, dirs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop("vol")
	if modes := run.Engine.ReplicaModes(); modes["vol-r-0"] != volumeengine.ModeERR || modes["vol-r-1"] != volumeengine.ModeRW {
		t.Fatalf("modes after the restart %v, want vol-r-0:ERR vol-r-1:RW", modes)
	}
	got := make([]byte, len(acked))
	if _, err := run.Engine.ReadAt(got, 0); err != nil || !bytes.Equal(got, acked) {
		t.Fatalf("the volume does not read what it acknowledged (%v)", err)
	}
}

// A replica created empty (a replica added to the volume) beside replicas
// that hold data is behind them: it is not RW, and reads never go to it.
func TestANewReplicaBesideDataIsNotRW(t *testing.T) {
	m := newTestEngines()
	const size = 1 << 20
	dirs := []ReplicaDir{{Name: "vol-r-1", Dir: filepath.Join(t.TempDir(), "vol-r-1"), New: true}}
	run, err := m.Start("vol", size, dirs, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}
	dirs[0].New = false
	// vol-r-0 sorts first: before, reads went to it and found zeros.
	dirs = append(dirs, ReplicaDir{Name: "vol-r-0", Dir: filepath.Join(t.TempDir(), "vol-r-0"), New: true})
	run, err = m.Start("vol", size, dirs, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop("vol")
	if modes := run.Engine.ReplicaModes(); modes["vol-r-0"] != volumeengine.ModeERR || modes["vol-r-1"] != volumeengine.ModeRW {
		t.Fatalf("modes %v, want the new, empty vol-r-0 ERR", modes)
	}
	buf := make([]byte, 4)
	if _, err := run.Engine.ReadAt(buf, 0); err != nil || string(buf) != "data" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// A start that creates one replica beside another that is still New (a
// first start cut short after creating it) holds no data yet: both are RW.
func TestReplicasCreatedAtTheFirstStartAreRW(t *testing.T) {
	m := newTestEngines()
	const size = 1 << 20
	dir0 := filepath.Join(t.TempDir(), "vol-r-0")
	if _, err := m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir0, New: true}}, false); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop("vol"); err != nil {
		t.Fatal(err)
	}
	run, err := m.Start("vol", size, []ReplicaDir{{Name: "vol-r-0", Dir: dir0, New: true}, {Name: "vol-r-1", Dir: filepath.Join(t.TempDir(), "vol-r-1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop("vol")
	if modes := run.Engine.ReplicaModes(); modes["vol-r-0"] != volumeengine.ModeRW || modes["vol-r-1"] != volumeengine.ModeRW {
		t.Fatalf("modes %v, want both RW", modes)
	}
}

// A replica marked Failed is not opened, but no replica whose data is
// behind it is RW: with vol-r-1 (which holds the acknowledged writes)
// marked failed, vol-r-0 alone does not start; with vol-r-0 marked failed,
// vol-r-1 serves the volume.
func TestAFailedReplicaIsNotOpenedButCompared(t *testing.T) {
	m, dirs, tmpfs, acked := failedReplicaEngines(t)
	testfs.Resize(t, tmpfs, "64m")
	only0 := []ReplicaDir{dirs[0], dirs[1]}
	only0[1].Failed = true
	if _, err := m.Start("vol", 4<<20, only0, false); !errors.Is(err, volumeengine.ErrNoHealthyReplica) || !strings.Contains(err.Error(), "vol-r-1") {
		t.Fatalf("start on vol-r-0 with vol-r-1, which is ahead of it, failed: %v", err)
	}
	if _, running := m.Get("vol"); running {
		t.Fatal("an engine runs on a replica that is behind")
	}
	only1 := []ReplicaDir{dirs[0], dirs[1]}
	only1[0].Failed = true
	run, err := m.Start("vol", 4<<20, only1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop("vol")
	if modes := run.Engine.ReplicaModes(); len(modes) != 1 || modes["vol-r-1"] != volumeengine.ModeRW {
		t.Fatalf("modes %v, want vol-r-1:RW alone", modes)
	}
	got := make([]byte, len(acked))
	if _, err := run.Engine.ReadAt(got, 0); err != nil || !bytes.Equal(got, acked) {
		t.Fatalf("read %v", err)
	}
}
