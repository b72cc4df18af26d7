package volumeengine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// chainOf is replica r's chain as JSON, to compare replicas' chains.
func chainOf(t *testing.T, name string, r *replica.Replica) string {
	t.Helper()
	list, err := r.Snapshots()
	if err != nil {
		t.Fatalf("replica %s: %v", name, err)
	}
	out, _ := json.Marshal(list)
	return string(out)
}

// snapshotReadsAs checks that snapshot snap of r reads want.
func snapshotReadsAs(t *testing.T, what string, r *replica.Replica, snap string, want []byte) {
	t.Helper()
	v, err := r.OpenSnapshot(snap)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer v.Close()
	readsAs(t, what, v, want)
}

// An engine over one local and two remote replicas deletes a snapshot,
// purges it (its data merged into its child on every replica alike: the
// replicas read the same, their chains are the same, the child holds
// what it held), reverts with no frontend, and grows: on every replica
// the same, none dropped.
func TestAnEngineOverRemoteReplicasDeletesPurgesRevertsAndGrows(t *testing.T) {
	e, a, servers := mixedEngine(t)
	replicas := map[string]*replica.Replica{"a": a, "b": servers["b"].r, "c": servers["c"].r}
	model := newModel(remoteSize)
	checksummedBlocks(t, e, model, 1, 100, 0, remoteSize)
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	checksummedBlocks(t, e, model, 2, 100, 0, remoteSize)
	atS2 := model.snapshot()
	if _, err := e.CreateSnapshot("s2", nil); err != nil {
		t.Fatal(err)
	}
	checksummedBlocks(t, e, model, 3, 50, 0, remoteSize)
	if t.Failed() {
		t.FailNow()
	}

	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	for name, r := range replicas {
		if exists, removed := r.SnapshotRemoved("s1"); !exists || !removed {
			t.Fatalf("replica %s: s1 exists %v, removed %v", name, exists, removed)
		}
	}
	if err := e.DeleteSnapshot("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleting a snapshot no replica has: want ErrNotFound, got %v", err)
	}

	e.StartPurge()
	waitPurge(t, e)
	if !e.WasPurged("s1") {
		t.Fatal("the engine does not say s1 was purged")
	}
	want := model.snapshot()
	chain := ""
	for name, r := range replicas {
		if r.HasSnapshot("s1") {
			t.Fatalf("replica %s still has s1", name)
		}
		readsAs(t, "replica "+name+" after the purge", r, want)
		snapshotReadsAs(t, "s2 of replica "+name+" after the purge", r, "s2", atS2)
		if c := chainOf(t, name, r); chain == "" {
			chain = c
		} else if c != chain {
			t.Fatalf("replica %s's chain %s, another's %s", name, c, chain)
		}
	}
	readsAs(t, "the engine after the purge", e, want)

	e.SetFrontend(true)
	if err := e.RevertSnapshot("s2"); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a revert while a frontend serves: want ErrPrecondition, got %v", err)
	}
	e.SetFrontend(false)
	if err := e.RevertSnapshot("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a revert to a snapshot no replica has: want ErrNotFound, got %v", err)
	}
	if err := e.RevertSnapshot("s2"); err != nil {
		t.Fatal(err)
	}
	for name, r := range replicas {
		readsAs(t, "replica "+name+" after the revert", r, atS2)
	}
	readsAs(t, "the engine after the revert", e, atS2)

	if err := e.Expand(2 * remoteSize); err != nil {
		t.Fatal(err)
	}
	if e.Size() != 2*remoteSize {
		t.Fatalf("the engine's size %d", e.Size())
	}
	for _, m := range e.replicas {
		if m.r.Size() != 2*remoteSize {
			t.Fatalf("replica %s says %d bytes after the growth", m.name, m.r.Size())
		}
	}
	tail := random(9, 64<<10)
	if _, err := e.WriteAt(tail, 2*remoteSize-int64(len(tail))); err != nil {
		t.Fatalf("a write past the old end: %v", err)
	}
	grown := append(bytes.Clone(atS2), make([]byte, remoteSize)...)
	copy(grown[2*remoteSize-len(tail):], tail)
	for name, r := range replicas {
		if r.Size() != 2*remoteSize {
			t.Fatalf("replica %s has %d bytes", name, r.Size())
		}
		readsAs(t, "replica "+name+" after the growth", r, grown)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}

	// The next engine, remote replicas only, finds them all at the new
	// size and of one epoch.
	e.Close()
	next, err := startEngine(t, "engine-2", 2, nil, map[string]string{"b": servers["b"].addr, "c": servers["c"].addr})
	if err != nil {
		t.Fatal(err)
	}
	if next.Size() != 2*remoteSize {
		t.Fatalf("the next engine's size %d", next.Size())
	}
	readsAs(t, "the next engine", next, grown)
}

// A remote replica whose purge fails is dropped, as a local one is, and
// the others' purge holds.
func TestARemoteReplicaWhosePurgeFailsIsDropped(t *testing.T) {
	e, a, servers := mixedEngine(t)
	for _, n := range []string{"s1", "s2"} {
		if _, err := e.WriteAt(random(int64(len(n)), 64<<10), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateSnapshot(n, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	// c's server is gone: its purge fails.
	servers["c"].stop()
	e.StartPurge()
	waitPurge(t, e)
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeERR {
		t.Fatalf("modes %v, want c dropped", modes)
	}
	if a.HasSnapshot("s1") || servers["b"].r.HasSnapshot("s1") || !servers["c"].r.HasSnapshot("s1") {
		t.Fatal("the purge did not reach the replicas that carry on, or reached the dropped one")
	}
	if a.Epoch() != 1 || servers["b"].r.Epoch() != 1 {
		t.Fatalf("epochs a %d, b %d: want them above the dropped replica's", a.Epoch(), servers["b"].r.Epoch())
	}
}

// An engine that a newer one fenced deletes, purges, reverts and grows
// nothing: each is refused with ErrFenced, and no replica's chain, size
// or data changes.
func TestAFencedEnginesChainChangesChangeNothing(t *testing.T) {
	a := newReplica(t, remoteSize)
	servers := map[string]*replicaServer{"a": serveReplica(t, "a", a)}
	for _, n := range []string{"b", "c"} {
		servers[n] = serveReplica(t, n, newReplica(t, remoteSize))
	}
	first, err := startEngine(t, "engine-A", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": servers["b"].addr, "c": servers["c"].addr})
	if err != nil {
		t.Fatal(err)
	}
	data := random(1, 64<<10)
	if _, err := first.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s1", "s2"} {
		if _, err := first.CreateSnapshot(n, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	chains := map[string]string{}
	for name, s := range servers {
		chains[name] = chainOf(t, name, s.r)
	}
	if _, err := startEngine(t, "engine-B", 2, nil, map[string]string{"a": servers["a"].addr, "b": servers["b"].addr, "c": servers["c"].addr}); err != nil {
		t.Fatal(err)
	}
	first.StartPurge()
	for deadline := time.Now().Add(10 * time.Second); first.PurgeStatus().IsPurging && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if st := first.PurgeStatus(); st.State != "error" || !strings.Contains(st.Error, replica.ErrFenced.Error()) {
		t.Fatalf("the fenced engine's purge: %+v", st)
	}
	for what, err := range map[string]error{
		"delete": first.DeleteSnapshot("s2"),
		"revert": first.RevertSnapshot("s2"),
		"grow":   first.Expand(2 * remoteSize),
	} {
		if !errors.Is(err, replica.ErrFenced) {
			t.Fatalf("the fenced engine's %s: want ErrFenced, got %v", what, err)
		}
	}
	want := make([]byte, remoteSize)
	copy(want, data)
	for name, s := range servers {
		if c := chainOf(t, name, s.r); c != chains[name] {
			t.Fatalf("replica %s's chain changed: %s, then %s", name, chains[name], c)
		}
		if s.r.Size() != remoteSize || s.r.Epoch() != 0 {
			t.Fatalf("replica %s: %d bytes, epoch %d", name, s.r.Size(), s.r.Epoch())
		}
		readsAs(t, "replica "+name, s.r, want)
	}
	if failures := first.ReplicaFailures(); len(failures) != 0 {
		t.Fatalf("the fenced engine marked replicas failed: %v", failures)
	}
}

// A removed snapshot that a view of the local replica reads is kept by a
// trim on the remote replicas too: the engine sends them its keep list,
// and every replica reads the same after the trim.
func TestATrimKeepsOnRemoteReplicasWhatALocalViewReads(t *testing.T) {
	e, a, servers := mixedEngine(t)
	old := random(1, 1<<20)
	if _, err := e.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(random(2, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	// A view of s1 in the engine's own process, not held by the engine
	// (a reader of the replica itself): s1 may be deleted meanwhile.
	v, err := a.OpenSnapshot("s1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	if err := e.Trim(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, remoteSize)
	copy(want, old)
	for name, r := range map[string]*replica.Replica{"a": a, "b": servers["b"].r, "c": servers["c"].r} {
		readsAs(t, "replica "+name+" after the trim", r, want)
	}
	readsAs(t, "the view of s1", v, want[:remoteSize])
}

// A remote replica's purge that takes longer than an I/O's deadline is
// not dropped for it (a purge has the control deadline), and the
// volume's writes wait for it, as they wait for a local replica's purge:
// a write begun while it runs returns only once every replica has purged.
func TestWritesWaitForARemotePurgeLongerThanAnIOsDeadline(t *testing.T) {
	a := newReplica(t, remoteSize)
	b := serveReplica(t, "b", newReplica(t, remoteSize))
	p := newProxy(t, b.addr)
	const deadline = 300 * time.Millisecond
	e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": p.addr}, ReplicaTimeout(deadline))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"s1", "s2"} {
		if _, err := e.WriteAt(random(int64(len(n)), 1<<20), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateSnapshot(n, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteSnapshot("s1"); err != nil {
		t.Fatal(err)
	}
	// The network stalls for three I/O deadlines while b purges.
	p.frozen.Store(true)
	e.StartPurge()
	for e.PurgeStatus().Progress < 50 {
		time.Sleep(time.Millisecond)
	}
	wrote := make(chan bool, 1)
	go func() {
		_, err := e.WriteAt(random(3, 4096), 0)
		wrote <- err == nil && !b.r.HasSnapshot("s1")
	}()
	time.Sleep(3 * deadline)
	select {
	case <-wrote:
		t.Fatal("a write returned while a replica's purge ran")
	default:
	}
	p.frozen.Store(false)
	if ok := <-wrote; !ok {
		t.Fatal("the write failed, or returned before the remote replica's purge")
	}
	waitPurge(t, e)
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW {
		t.Fatalf("modes %v: a purge slower than an I/O's deadline dropped a replica", modes)
	}
	if a.HasSnapshot("s1") || b.r.HasSnapshot("s1") {
		t.Fatal("s1 was not purged everywhere")
	}
}

// A remote replica left at the old size by a growth cut short (replicas
// of one epoch and two sizes) is grown by the next engine, over the
// protocol, as a local one is.
func TestTheNextEngineGrowsARemoteReplicaAGrowthMissed(t *testing.T) {
	a := newReplica(t, remoteSize)
	if err := a.Grow(2 * remoteSize); err != nil {
		t.Fatal(err)
	}
	b := serveReplica(t, "b", newReplica(t, remoteSize))
	e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": b.addr})
	if err != nil {
		t.Fatal(err)
	}
	if e.Size() != 2*remoteSize || b.r.Size() != 2*remoteSize {
		t.Fatalf("the engine has %d bytes, b %d: want both grown to %d", e.Size(), b.r.Size(), 2*remoteSize)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}
	if _, err := e.WriteAt(random(1, 4096), 2*remoteSize-4096); err != nil {
		t.Fatalf("a write past b's old end: %v", err)
	}
}
