package volumeengine

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
)

const rebuildVolSize = 32 << 20

// writer writes checksummed blocks through e until stop, some of them
// covering parts of blocks, recording each acknowledged write in model.
func writer(t *testing.T, e *Engine, model *volumeModel, seed int64, stop <-chan struct{}, writes *atomic.Int64) {
	rnd := rand.New(rand.NewSource(seed))
	for {
		select {
		case <-stop:
			return
		default:
		}
		n := int64(1+rnd.Intn(32)) * replica.BlockSize
		off := rnd.Int63n((rebuildVolSize-n)/replica.BlockSize+1) * replica.BlockSize
		if rnd.Intn(4) == 0 {
			// A write of part of a block: a WO replica takes it widened.
			n, off = int64(1+rnd.Intn(3000)), off+int64(rnd.Intn(1000))
		}
		p := make([]byte, n)
		rnd.Read(p)
		if _, err := e.WriteAt(p, off); err != nil {
			t.Errorf("write of %d bytes at %d: %v", n, off, err)
			return
		}
		model.acked(p, off)
		writes.Add(1)
	}
}

// waitRebuilt waits until replica name's rebuild ends, and returns its
// status.
func waitRebuilt(t *testing.T, e *Engine, name string) RebuildStatus {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if s, ok := e.RebuildStatus()[name]; ok && !s.IsRebuilding {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("replica %s's rebuild did not end", name)
	return RebuildStatus{}
}

// sameChain compares two chains: names, IDs, parents, labels, marks and
// the data each layer holds.
func sameChain(t *testing.T, what string, a, b []replica.Snapshot) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d snapshots, not %d", what, len(b), len(a))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.ID != y.ID || x.Parent != y.Parent || x.Removed != y.Removed || x.UserCreated != y.UserCreated ||
			x.Created != y.Created || !maps.Equal(x.Labels, y.Labels) || (x.Name != replica.HeadName && x.Size != y.Size) {
			t.Fatalf("%s: snapshot %d: %+v, not %+v", what, i, y, x)
		}
	}
}

// A new remote replica rebuilt into an engine over a local and a remote
// replica while a writer runs: after the rebuild all three read every
// acknowledged block, hold the same chain (the removed marks and labels
// of the snapshots before included) and read the same from each snapshot.
func TestARemoteReplicaIsRebuiltWhileTheVolumeIsWritten(t *testing.T) {
	r1, r2, r3 := newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize)
	s2, s3 := serveReplica(t, "r2", r2), serveReplica(t, "r3", r3)
	e, err := startEngine(t, "engine-a", 1, map[string]*replica.Replica{"r1": r1}, map[string]string{"r2": s2.addr})
	if err != nil {
		t.Fatal(err)
	}
	model := newModel(rebuildVolSize)
	checksummedBlocks(t, e, model, 1, 40, 0, rebuildVolSize)
	if _, err := e.CreateSnapshot("s1", map[string]string{"app": "db"}); err != nil {
		t.Fatal(err)
	}
	checksummedBlocks(t, e, model, 2, 40, 0, rebuildVolSize)
	if _, err := e.CreateSnapshot("s2", nil); err != nil {
		t.Fatal(err)
	}
	checksummedBlocks(t, e, model, 3, 40, 0, rebuildVolSize)
	if err := e.DeleteSnapshot("s2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s3", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { writer(t, e, model, 4, stop, &writes) })
	for writes.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	target, err := e.OpenRemoteReplica("r3", s3.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r3", target, ""); err != nil {
		t.Fatal(err)
	}
	if m := e.ReplicaModes()["r3"]; m != ModeWO && m != ModeRW {
		t.Fatalf("r3 joined %s", m)
	}
	// A deletion waits while the rebuild reads the layers.
	if err := e.DeleteSnapshot("s1"); err != nil && !errors.Is(err, ErrRebuilding) {
		t.Fatal(err)
	}
	st := waitRebuilt(t, e, "r3")
	before := writes.Load()
	for writes.Load() < before+50 {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if st.State != "complete" || st.Progress != 100 || st.Error != "" || st.FromReplica != "r1" {
		t.Fatalf("the rebuild's status: %+v", st)
	}
	if m := e.ReplicaModes(); m["r1"] != ModeRW || m["r2"] != ModeRW || m["r3"] != ModeRW {
		t.Fatalf("modes after the rebuild: %v", m)
	}
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	want := model.snapshot()
	readsAs(t, "the engine", e, want)
	chain, err := r1.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]*replica.Replica{"r1": r1, "r2": r2, "r3": r3} {
		readsAs(t, "replica "+name, r, want)
		got, err := r.Snapshots()
		if err != nil {
			t.Fatal(err)
		}
		sameChain(t, "replica "+name, chain, got)
		if r.Rebuilding() || r.Epoch() != r1.Epoch() {
			t.Fatalf("replica %s: rebuilding %v, epoch %d, not %d", name, r.Rebuilding(), r.Epoch(), r1.Epoch())
		}
	}
	if _, removed := r3.SnapshotRemoved("s2"); !removed {
		t.Fatal("the rebuilt replica lost s2's removed mark")
	}
	for _, s := range chain[:len(chain)-1] {
		var first []byte
		for name, r := range map[string]*replica.Replica{"r1": r1, "r2": r2, "r3": r3} {
			v, err := r.OpenSnapshot(s.Name)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, rebuildVolSize)
			_, err = v.ReadAt(got, 0)
			v.Close()
			if err != nil {
				t.Fatal(err)
			}
			if first == nil {
				first = got
			} else if !bytes.Equal(first, got) {
				t.Fatalf("snapshot %s reads otherwise on replica %s", s.Name, name)
			}
		}
	}
	// Reads from the rebuilt replica alone, once the others are dropped.
	e.mu.RLock()
	for _, m := range e.replicas {
		if m.name != "r3" {
			e.mu.RUnlock()
			e.fail(m, errors.New("dropped by the test"))
			e.mu.RLock()
		}
	}
	e.mu.RUnlock()
	readsAs(t, "the engine on the rebuilt replica alone", e, want)
}

// A rebuild whose source stops answering midway leaves the new replica
// ERR, saying why, and marked as being rebuilt; the volume goes on.
func TestARebuildWhoseSourceFailsLeavesTheReplicaERR(t *testing.T) {
	r1, r2, r3 := newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize)
	s2, s3 := serveReplica(t, "r2", r2), serveReplica(t, "r3", r3)
	p := newProxy(t, s2.addr)
	e, err := startEngine(t, "engine-a", 1, map[string]*replica.Replica{"r1": r1}, map[string]string{"r2": p.addr}, ReplicaTimeout(500*time.Millisecond), ReplicaControlTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	model := newModel(rebuildVolSize)
	checksummedBlocks(t, e, model, 1, 80, 0, rebuildVolSize)
	target, err := e.OpenRemoteReplica("r3", s3.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r3", target, "r2"); err != nil {
		t.Fatal(err)
	}
	p.frozen.Store(true)
	st := waitRebuilt(t, e, "r3")
	p.frozen.Store(false)
	if st.State != "error" || st.Error == "" || st.FromReplica != "r2" || st.FromReplicaAddress != p.addr {
		t.Fatalf("the rebuild's status: %+v", st)
	}
	if m := e.ReplicaModes(); m["r3"] != ModeERR || m["r1"] != ModeRW {
		t.Fatalf("modes: %v", m)
	}
	if f := e.ReplicaFailures()["r3"]; f.Why == "" || f.Behind {
		t.Fatalf("r3's failure: %+v", f)
	}
	if !r3.Rebuilding() {
		t.Fatal("a replica whose rebuild failed is not marked as being rebuilt")
	}
	checksummedBlocks(t, e, model, 2, 20, 0, rebuildVolSize)
	readsAs(t, "the engine", e, model.snapshot())
	readsAs(t, "replica r1", r1, model.snapshot())
	// An engine started again over it does not take it for current.
	e.Close()
	_, err = startEngine(t, "engine-b", 2, nil, map[string]string{"r3": s3.addr})
	if !errors.Is(err, ErrNoHealthyReplica) || !strings.Contains(err.Error(), "rebuild did not finish") {
		t.Fatalf("an engine over a replica whose rebuild failed: %v", err)
	}
}

// A rebuild whose target a newer engine takes fences the engine: it
// stops, and marks nothing failed; the healthy replicas keep their data.
func TestARebuildWhoseTargetIsFencedStopsTheEngine(t *testing.T) {
	r1, r3 := newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize)
	s3 := serveReplica(t, "r3", r3)
	e, err := startEngine(t, "engine-a", 1, map[string]*replica.Replica{"r1": r1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := newModel(rebuildVolSize)
	checksummedBlocks(t, e, model, 1, 200, 0, rebuildVolSize)
	target, err := e.OpenRemoteReplica("r3", s3.addr)
	if err != nil {
		t.Fatal(err)
	}
	// A target that cannot begin its rebuild is refused, and closed.
	r3.Close()
	if err := e.StartRebuild("r3", target, ""); err == nil {
		t.Fatal("a rebuild into a closed replica began")
	}
	if _, ok := e.ReplicaModes()["r3"]; ok {
		t.Fatal("a refused replica joined the engine")
	}

	// Fenced for real: a newer engine opens the target mid-rebuild.
	r4 := newReplica(t, rebuildVolSize)
	s4 := serveReplica(t, "r4", r4)
	target, err = e.OpenRemoteReplica("r4", s4.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r4", target, ""); err != nil {
		t.Fatal(err)
	}
	newer, err := replicaproto.Dial(context.Background(), s4.addr, nil, replicaproto.OpenRequest{VolumeUID: testVolumeUID, Replica: "r4", Engine: "engine-b", Term: 2}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	st := waitRebuilt(t, e, "r4")
	if st.State == "complete" {
		// The copy ended before the newer engine's open: the next write
		// meets the fence.
		_, _ = e.WriteAt(make([]byte, replica.BlockSize), 0)
	}
	if !errors.Is(e.Fenced(), replica.ErrFenced) {
		t.Fatalf("the engine is not fenced: %v, status %+v", e.Fenced(), st)
	}
	readsAs(t, "replica r1", r1, model.snapshot())
}

// A rebuild to or from a replica whose server speaks version 2 of the
// replica protocol or older is refused before anything is sent,
// ErrNotCarried naming the replica and its address.
func TestARebuildWithAnOlderServerIsRefused(t *testing.T) {
	r1, r2, r3 := newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize)
	old2 := serveAsVersion1(t, serveReplica(t, "r2", r2).addr)
	old3 := serveAsVersion1(t, serveReplica(t, "r3", r3).addr)
	s3 := serveReplica(t, "r3", r3)
	e, err := startEngine(t, "engine-a", 1, map[string]*replica.Replica{"r1": r1}, map[string]string{"r2": old2.addr})
	if err != nil {
		t.Fatal(err)
	}
	target, err := e.OpenRemoteReplica("r3", old3.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r3", target, ""); !errors.Is(err, ErrNotCarried) || !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), old3.addr) {
		t.Fatalf("a rebuild into a replica of an older server: %v", err)
	}
	target, err = e.OpenRemoteReplica("r3", s3.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r3", target, "r2"); !errors.Is(err, ErrNotCarried) || !strings.Contains(err.Error(), old2.addr) {
		t.Fatalf("a rebuild from a replica of an older server: %v", err)
	}
	if r3.Rebuilding() {
		t.Fatal("a refused rebuild touched the target")
	}
	if _, ok := e.ReplicaModes()["r3"]; ok {
		t.Fatal("a refused replica joined")
	}
}

// While a rebuild reads the layers a snapshot's deletion is refused and a
// purge waits; both go ahead once it ends (here: its target stalls, and
// is dropped at its deadline).
func TestAPurgeWaitsForARebuild(t *testing.T) {
	r1, r3 := newReplica(t, rebuildVolSize), newReplica(t, rebuildVolSize)
	p := newProxy(t, serveReplica(t, "r3", r3).addr)
	e, err := startEngine(t, "engine-a", 1, map[string]*replica.Replica{"r1": r1}, nil, ReplicaTimeout(time.Second), ReplicaControlTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	model := newModel(rebuildVolSize)
	checksummedBlocks(t, e, model, 1, 300, 0, rebuildVolSize)
	for _, s := range []string{"s1", "s2"} {
		if _, err := e.CreateSnapshot(s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	target, err := e.OpenRemoteReplica("r3", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.StartRebuild("r3", target, ""); err != nil {
		t.Fatal(err)
	}
	p.frozen.Store(true)
	if !e.RebuildStatus()["r3"].IsRebuilding {
		t.Skip("the rebuild ended before its target stalled")
	}
	if err := e.DeleteSnapshot("s2"); !errors.Is(err, ErrRebuilding) || !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a deletion during a rebuild: %v", err)
	}
	e.StartPurge()
	time.Sleep(200 * time.Millisecond)
	if ps := e.PurgeStatus(); !ps.IsPurging || !r1.HasSnapshot("s1") {
		t.Fatalf("the purge did not wait for the rebuild: %+v", ps)
	}
	st := waitRebuilt(t, e, "r3")
	p.frozen.Store(false)
	if st.State != "error" {
		t.Fatalf("the rebuild: %+v", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for e.PurgeStatus().IsPurging && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ps := e.PurgeStatus(); ps.State != "complete" || r1.HasSnapshot("s1") {
		t.Fatalf("the purge after the rebuild: %+v", ps)
	}
	if err := e.DeleteSnapshot("s2"); err != nil {
		t.Fatal(err)
	}
	readsAs(t, "the engine", e, model.snapshot())
}
