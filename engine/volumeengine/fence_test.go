package volumeengine

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// The fence (docs/design-data-plane.md, "Two writers never happen"): a
// second engine opens the same replicas with a higher term while the
// first one writes. The first engine's writes then fail with ErrFenced,
// none of them is acknowledged once the second's open returned, it marks
// no replica failed and raises no epoch; every block it acknowledged
// before is what the second reads, and every block the second
// acknowledged reads back from the second and from every replica.
//
// The first engine has replica a in its own process (its instance
// manager serves a to others, as the design has it) and b and c remote;
// the second reaches all three remotely.
func TestASecondEngineWithAHigherTermFencesTheFirst(t *testing.T) {
	a := newReplica(t, remoteSize)
	servers := map[string]*replicaServer{"a": serveReplica(t, "a", a)}
	for _, n := range []string{"b", "c"} {
		servers[n] = serveReplica(t, n, newReplica(t, remoteSize))
	}
	first, err := startEngine(t, "engine-A", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": servers["b"].addr, "c": servers["c"].addr})
	if err != nil {
		t.Fatal(err)
	}
	const blocks = 1024
	var (
		opened   atomic.Bool  // the second engine's open returned
		acked    atomic.Int64 // the first engine's acknowledged writes
		late     atomic.Int64 // of them, those begun after the second's open
		stop     = make(chan struct{})
		done     = make(chan struct{})
		lastAck  = map[int][]byte{} // by block, what the first engine last acknowledged
		fenceErr error              // the first engine's first failed write
		failing  int                // its block
		afterErr []error            // its writes after that one that did not fail with ErrFenced
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			block := i % blocks
			p := random(int64(i)+1, replica.BlockSize)
			begunAfter := opened.Load()
			if _, err := first.WriteAt(p, int64(block)*replica.BlockSize); err != nil {
				fenceErr, failing = err, block
				break
			}
			lastAck[block] = p
			acked.Add(1)
			if begunAfter {
				late.Add(1)
			}
		}
		// It goes on trying while the second engine writes.
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := first.WriteAt(random(9, replica.BlockSize), 0); !errors.Is(err, replica.ErrFenced) {
				afterErr = append(afterErr, err)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	for acked.Load() < 300 {
		time.Sleep(time.Millisecond)
	}
	second, err := startEngine(t, "engine-B", 2, nil, map[string]string{"a": servers["a"].addr, "b": servers["b"].addr, "c": servers["c"].addr})
	if err != nil {
		t.Fatal(err)
	}
	opened.Store(true)
	atOpen := make([]byte, blocks*replica.BlockSize)
	if _, err := second.ReadAt(atOpen, 0); err != nil {
		t.Fatal(err)
	}
	model := newModel(remoteSize)
	for b := range blocks {
		p := random(int64(1e6+b), replica.BlockSize)
		if _, err := second.WriteAt(p, int64(b)*replica.BlockSize); err != nil {
			t.Fatalf("the second engine's write of block %d: %v", b, err)
		}
		model.acked(p, int64(b)*replica.BlockSize)
	}
	if err := second.Sync(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the first engine was never fenced")
	}

	if !errors.Is(fenceErr, replica.ErrFenced) {
		t.Fatalf("the first engine's failed write: want ErrFenced, got %v", fenceErr)
	}
	if late.Load() != 0 {
		t.Fatalf("%d writes of the first engine begun after the second's open were acknowledged", late.Load())
	}
	if len(afterErr) > 0 {
		t.Fatalf("writes of the fenced engine: want ErrFenced, got %v", afterErr)
	}
	if !errors.Is(first.Fenced(), replica.ErrFenced) {
		t.Fatalf("the first engine does not say it is fenced: %v", first.Fenced())
	}
	for what, err := range map[string]error{
		"sync":     first.Sync(),
		"snapshot": func() error { _, err := first.CreateSnapshot("s1", nil); return err }(),
		"read":     func() error { _, err := first.ReadAt(make([]byte, 4096), 0); return err }(),
	} {
		if !errors.Is(err, replica.ErrFenced) {
			t.Fatalf("the fenced engine's %s: want ErrFenced, got %v", what, err)
		}
	}
	if modes, failures := first.ReplicaModes(), first.ReplicaFailures(); len(failures) != 0 || modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeRW {
		t.Fatalf("the fenced engine marked replicas failed: %v, %v", modes, failures)
	}
	// What the first engine acknowledged (but the block of its write that
	// failed, which may have reached some replicas) is what the second
	// found.
	for b, p := range lastAck {
		if b != failing && !bytes.Equal(atOpen[b*replica.BlockSize:(b+1)*replica.BlockSize], p) {
			t.Fatalf("block %d, acknowledged by the first engine, reads otherwise in the second", b)
		}
	}
	want := model.snapshot()
	readsAs(t, "the second engine", second, want)
	for name, s := range servers {
		readsAs(t, "replica "+name, s.r, want)
		if s.r.Epoch() != 0 {
			t.Fatalf("replica %s's epoch is %d: no replica failed", name, s.r.Epoch())
		}
		if term, holder := s.r.Term(); term != 2 || holder != "engine-B" {
			t.Fatalf("replica %s holds term %d of %q", name, term, holder)
		}
	}
}

// A write of the fenced engine lands on no replica, its own process's
// included: the term is checked by each replica with the write, in one
// step (replica.Owned), not by the engine before it.
func TestAFencedEnginesWriteLandsOnNoReplica(t *testing.T) {
	a := newReplica(t, remoteSize)
	servers := map[string]*replicaServer{"a": serveReplica(t, "a", a)}
	for _, n := range []string{"b", "c"} {
		servers[n] = serveReplica(t, n, newReplica(t, remoteSize))
	}
	first, err := startEngine(t, "engine-A", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": servers["b"].addr, "c": servers["c"].addr})
	if err != nil {
		t.Fatal(err)
	}
	before := random(1, 64<<10)
	if _, err := first.WriteAt(before, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := startEngine(t, "engine-B", 2, nil, map[string]string{"a": servers["a"].addr, "b": servers["b"].addr, "c": servers["c"].addr}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.WriteAt(random(2, 64<<10), 0); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the first engine's write after the second's open: want ErrFenced, got %v", err)
	}
	want := make([]byte, remoteSize)
	copy(want, before)
	for name, s := range servers {
		readsAs(t, "replica "+name, s.r, want)
	}
}
