package instancemanager

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// serve runs an instance manager on dir until the returned stop is called.
func serve(t *testing.T, dir string) (stop func()) {
	t.Helper()
	return serveConfig(t, Config{Dir: dir, FrontendHost: "127.0.0.1"})
}

// serveConfig runs an instance manager of cfg until the returned stop is
// called.
func serveConfig(t *testing.T, cfg Config) (stop func()) {
	t.Helper()
	dir := cfg.Dir
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, cfg, logrus.NewEntry(logrus.StandardLogger())) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if answers(SocketPath(dir)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the instance manager did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

func dial(t *testing.T, dir string) *Client {
	t.Helper()
	c, err := Dial(SocketPath(dir), logrus.NewEntry(logrus.StandardLogger()), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestEnginesOutliveTheClient: an engine started through one client runs
// on after it closes, and a new client (a manager started again) finds
// it, the same engine, with its snapshot, and is told of its changes.
func TestEnginesOutliveTheClient(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	serve(t, dir)
	first := dial(t, dir)
	replicas := []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}
	run, err := first.Start("vol", 4<<20, replicas, true)
	if err != nil {
		t.Fatal(err)
	}
	if run.Endpoint == "" || run.Engine.Size() != 4<<20 {
		t.Fatalf("started %+v size %d: want a frontend and 4 MiB", run, run.Engine.Size())
	}
	if _, err := run.Engine.CreateSnapshot("snap-1", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := dial(t, dir)
	var changes atomic.Int32
	second.OnChange(func(v string) {
		if v == "vol" {
			changes.Add(1)
		}
	})
	again, ok := second.Get("vol")
	if !ok || again.Endpoint != run.Endpoint {
		t.Fatalf("after the client's restart: Get = %+v, %v; want the engine at %s", again, ok, run.Endpoint)
	}
	snap, err := again.Engine.Snapshot("snap-1")
	if err != nil || snap.Labels["k"] != "v" {
		t.Fatalf("Snapshot = %+v, %v", snap, err)
	}
	// Starting it again returns the running engine: no second one.
	same, err := second.Start("vol", 4<<20, replicas, true)
	if err != nil || same.Endpoint != run.Endpoint {
		t.Fatalf("Start of a running engine = %+v, %v", same, err)
	}
	gen := again.Engine.Generation()
	if _, err := again.Engine.CreateSnapshot("snap-2", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the change's event", func() bool { return changes.Load() > 0 && again.Engine.Generation() > gen })
	st := again.Engine.Status()
	if st.SnapshotsError != nil || len(st.Snapshots) != 3 || st.ReplicaModes["r1"] != volumeengine.ModeRW {
		t.Fatalf("Status = %+v: want snap-1, snap-2 and the head, r1 RW", st)
	}
	if err := second.StopEngine("vol", again.Engine); err != nil {
		t.Fatal(err)
	}
	if _, ok := second.Get("vol"); ok {
		t.Fatal("the engine is still listed after its stop")
	}
}

// TestEngineErrorsCrossTheSocket: the controllers tell the engine's
// errors apart as in process.
func TestEngineErrorsCrossTheSocket(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	serve(t, dir)
	c := dial(t, dir)
	_, err := c.Start("old", 1<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "gone")}}, false)
	var missing *instance.MissingDataError
	if !errors.As(err, &missing) || missing.Replica != "r1" {
		t.Fatalf("Start on missing data = %v; want a MissingDataError for r1", err)
	}
	run, err := c.Start("vol", 1<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Engine.DeleteSnapshot("nothing"); !errors.Is(err, volumeengine.ErrNotFound) {
		t.Fatalf("DeleteSnapshot of none = %v; want ErrNotFound", err)
	}
	if _, err := run.Engine.CreateSnapshot("s", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("s", nil); !errors.Is(err, volumeengine.ErrExists) || !errors.Is(err, volumeengine.ErrInvalid) {
		t.Fatalf("a second snapshot s = %v; want ErrExists, an ErrInvalid", err)
	}
}

// TestOneInstanceManagerPerFolder: a second one on the same folder does
// not start; the client of one that stops hears that its engines stopped,
// a call then cannot reach it, and the client follows the next one.
func TestOneInstanceManagerPerFolder(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	stop := serve(t, dir)
	if err := Serve(context.Background(), Config{Dir: dir, FrontendHost: "127.0.0.1"}, logrus.NewEntry(logrus.StandardLogger())); !errors.Is(err, ErrRunning) {
		t.Fatalf("a second Serve = %v; want ErrRunning", err)
	}
	c := dial(t, dir)
	replicas := []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}
	run, err := c.Start("vol", 1<<20, replicas, false)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	eventually(t, "the engine's stop", func() bool { _, ok := c.Get("vol"); return !ok })
	if _, err := run.Engine.CreateSnapshot("s", nil); !errors.Is(err, instance.ErrUnreachable) {
		t.Fatalf("a call while the instance manager is gone = %v; want ErrUnreachable", err)
	}
	serve(t, dir)
	eventually(t, "the next instance manager", func() bool {
		_, err := c.Start("vol", 1<<20, replicas, false)
		return err == nil
	})
	if _, ok := c.Get("vol"); !ok {
		t.Fatal("the engine started in the next instance manager is not listed")
	}
}

// TestSecondEngineOnTheSameReplicas: an engine of another instance
// manager (or of a manager's own process) cannot open the replicas an
// engine has open: it never writes beside it.
func TestSecondEngineOnTheSameReplicas(t *testing.T) {
	data := t.TempDir()
	first, second := t.TempDir(), t.TempDir()
	serve(t, first)
	serve(t, second)
	a, b := dial(t, first), dial(t, second)
	replicas := []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}
	if _, err := a.Start("vol", 1<<20, replicas, true); err != nil {
		t.Fatal(err)
	}
	_, err := b.Start("vol", 1<<20, replicas, true)
	if err == nil || !strings.Contains(err.Error(), replica.ErrLocked.Error()) {
		t.Fatalf("a second engine on the same replica = %v; want it refused as open in another engine", err)
	}
	local := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clock.RealClock{}, logrus.NewEntry(logrus.StandardLogger()), func(string) {}, nil)
	if _, err := local.Start("vol", 1<<20, replicas, false); !errors.Is(err, replica.ErrLocked) {
		t.Fatalf("an in-process engine on the same replica = %v; want ErrLocked", err)
	}
}

// TestALongFolderServes: a folder whose socket path would be too long for
// a Unix socket serves on one in the user's private temporary folder.
func TestALongFolderServes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-folder-name/", 6))
	if len(filepath.Join(dir, socketFile)) < maxSocketPath {
		t.Fatal("the folder is not long enough for the test")
	}
	serve(t, dir)
	c := dial(t, dir)
	if _, err := c.Start("vol", 1<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(t.TempDir(), "r1"), New: true}}, false); err != nil {
		t.Fatal(err)
	}
}
