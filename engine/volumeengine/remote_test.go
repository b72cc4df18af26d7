package volumeengine

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
)

const remoteSize = 16 << 20

// mixedEngine starts an engine over local replica a and remote replicas
// b and c, each served by a replica server of its own; it returns the
// servers of b and c.
func mixedEngine(t *testing.T, opts ...Option) (*Engine, *replica.Replica, map[string]*replicaServer) {
	t.Helper()
	return mixedEngineOn(t, newReplica(t, remoteSize), opts...)
}

// mixedEngineOn is mixedEngine with local replica a given.
func mixedEngineOn(t *testing.T, a *replica.Replica, opts ...Option) (*Engine, *replica.Replica, map[string]*replicaServer) {
	t.Helper()
	servers := map[string]*replicaServer{
		"b": serveReplica(t, "b", newReplica(t, remoteSize)),
		"c": serveReplica(t, "c", newReplica(t, remoteSize)),
	}
	e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a},
		map[string]string{"b": servers["b"].addr, "c": servers["c"].addr}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e, a, servers
}

// An engine over one local and two remote replicas: checksummed random
// writes from four writers at once, a snapshot, more writes; the engine
// and every replica read back what was acknowledged, and every replica's
// snapshot holds what was acknowledged before it.
func TestAnEngineOverOneLocalAndTwoRemoteReplicas(t *testing.T) {
	e, a, servers := mixedEngine(t)
	if modes := e.ReplicaModes(); len(modes) != 3 || modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeRW {
		t.Fatalf("modes %v", modes)
	}
	model := newModel(remoteSize)
	writers := func(seed int64) {
		var wg sync.WaitGroup
		for w := range 4 {
			// Each writer its own quarter: the model's order is then the
			// volume's.
			quarter := int64(remoteSize / 4)
			wg.Go(func() { checksummedBlocks(t, e, model, seed+int64(w), 100, int64(w)*quarter, int64(w+1)*quarter) })
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	writers(100)
	atSnapshot := model.snapshot()
	if _, err := e.CreateSnapshot("s1", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	writers(200)
	if err := e.Sync(); err != nil {
		t.Fatal(err)
	}
	want := model.snapshot()
	readsAs(t, "the engine", e, want)
	replicas := map[string]*replica.Replica{"a": a, "b": servers["b"].r, "c": servers["c"].r}
	var id string
	for name, r := range replicas {
		readsAs(t, "replica "+name, r, want)
		v, err := r.OpenSnapshot("s1")
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		readsAs(t, "snapshot s1 of replica "+name, v, atSnapshot)
		v.Close()
		list, err := r.Snapshots()
		if err != nil || len(list) != 2 || list[0].Name != "s1" || list[0].Labels["k"] != "v" {
			t.Fatalf("replica %s's chain: %+v, %v", name, list, err)
		}
		if id == "" {
			id = list[0].ID
		} else if list[0].ID != id {
			t.Fatalf("replica %s's s1 has ID %s, another's %s", name, list[0].ID, id)
		}
	}
	if list, err := e.Snapshots(); err != nil || len(list) != 2 || list[0].Name != "s1" {
		t.Fatalf("the engine's snapshots: %+v, %v", list, err)
	}
	for name, r := range replicas {
		if term, holder := r.Term(); term != 1 || holder != "engine-1" {
			t.Fatalf("replica %s holds term %d of %q", name, term, holder)
		}
	}
}

// The server of a remote replica stops while four writers write: the
// engine drops that replica, no writer sees an error, the writes go on
// on the others, and the dropped replica is marked as a failed one is:
// ERR, its failure said, the epoch of the others raised above its own,
// so that the next engine on the three does not take it for current.
func TestARemoteReplicaWhoseServerStopsIsDroppedAndTheWritesGoOn(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	a, err := replica.Create(dir, remoteSize)
	if err != nil {
		t.Fatal(err)
	}
	e, a, servers := mixedEngineOn(t, a)
	model := newModel(remoteSize)
	var written atomic.Int64
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	quarter := int64(remoteSize / 4)
	for w := range 4 {
		wg.Go(func() {
			for i := int64(0); ; i++ {
				select {
				case <-stopped:
					if i > 100 {
						return
					}
				default:
				}
				p := random(int64(w)*1000+i, 64<<10)
				off := int64(w)*quarter + (i*(64<<10))%quarter
				if _, err := e.WriteAt(p, off); err != nil {
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
				model.acked(p, off)
				written.Add(1)
			}
		})
	}
	for written.Load() < 100 {
		time.Sleep(time.Millisecond)
	}
	servers["c"].stop()
	close(stopped)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeERR {
		t.Fatalf("modes %v, want c ERR", modes)
	}
	failures := e.ReplicaFailures()
	if f, ok := failures["c"]; !ok || f.Behind || f.Why == "" || len(failures) != 1 {
		t.Fatalf("failures %+v", failures)
	}
	if a.Epoch() != 1 || servers["b"].r.Epoch() != 1 || servers["c"].r.Epoch() != 0 {
		t.Fatalf("epochs a %d, b %d, c %d: want the two that carry on raised above the dropped one", a.Epoch(), servers["b"].r.Epoch(), servers["c"].r.Epoch())
	}
	if _, err := e.WriteAt(random(7, 4096), 0); err != nil {
		t.Fatal(err)
	}
	model.acked(random(7, 4096), 0)
	want := model.snapshot()
	readsAs(t, "the engine", e, want)
	readsAs(t, "replica a", a, want)
	readsAs(t, "replica b", servers["b"].r, want)

	// The next engine, on all three (c served again), keeps c out.
	e.Close()
	if a, err = replica.Open(dir); err != nil {
		t.Fatal(err)
	}
	c := serveReplica(t, "c", servers["c"].r)
	next, err := startEngine(t, "engine-2", 2, map[string]*replica.Replica{"a": a}, map[string]string{"b": servers["b"].addr, "c": c.addr})
	if err != nil {
		t.Fatal(err)
	}
	if modes := next.ReplicaModes(); modes["c"] != ModeERR || modes["a"] != ModeRW || modes["b"] != ModeRW {
		t.Fatalf("the next engine's modes %v: the dropped replica must not be RW", modes)
	}
	readsAs(t, "the next engine", next, want)
}

// A remote replica that stops answering (its network stalls) is dropped
// once a request's deadline passes: the write waiting on it succeeds on
// the others, late by the deadline and no more.
func TestARemoteReplicaThatStopsAnsweringIsDroppedAtTheDeadline(t *testing.T) {
	a := newReplica(t, remoteSize)
	b := serveReplica(t, "b", newReplica(t, remoteSize))
	p := newProxy(t, b.addr)
	const deadline = 300 * time.Millisecond
	e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": p.addr}, ReplicaTimeout(deadline))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(random(1, 8192), 0); err != nil {
		t.Fatal(err)
	}
	p.frozen.Store(true)
	start := time.Now()
	if _, err := e.WriteAt(random(2, 8192), 8192); err != nil {
		t.Fatalf("a write while a replica stalls: %v", err)
	}
	took := time.Since(start)
	if took < deadline || took > deadline+2*time.Second {
		t.Fatalf("the write took %s, want about the %s deadline", took, deadline)
	}
	if modes := e.ReplicaModes(); modes["b"] != ModeERR {
		t.Fatalf("modes %v", modes)
	}
	if why := e.ReplicaFailures()["b"].Why; !strings.Contains(why, "did not answer in time") {
		t.Fatalf("b failed for %q", why)
	}
	if a.Epoch() != 1 {
		t.Fatalf("a's epoch %d, want 1", a.Epoch())
	}
}

// A peer that sends what the protocol does not allow (a frame of a bad
// magic, a reply to no request) is dropped as a replica whose I/O fails:
// no panic, and the write goes on on the others.
func TestARemoteReplicaThatSendsABadFrameIsDropped(t *testing.T) {
	for name, frame := range map[string][]byte{
		"a bad magic":           replyHeader(0xdeadbeef, 2, 0),
		"a reply to no request": replyHeader(0x4c485250, 1<<40, 1<<31),
	} {
		t.Run(name, func(t *testing.T) {
			a := newReplica(t, remoteSize)
			b := serveReplica(t, "b", newReplica(t, remoteSize))
			p := newProxy(t, b.addr)
			e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": p.addr})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.WriteAt(random(1, 8192), 0); err != nil {
				t.Fatal(err)
			}
			p.inject(frame)
			deadline := time.Now().Add(5 * time.Second)
			for e.ReplicaModes()["b"] == ModeRW && time.Now().Before(deadline) {
				if _, err := e.WriteAt(random(2, 4096), 8192); err != nil {
					t.Fatalf("a write after the bad frame: %v", err)
				}
			}
			if why := e.ReplicaFailures()["b"].Why; !strings.Contains(why, "replica protocol") {
				t.Fatalf("b failed for %q, want the protocol's error", why)
			}
			want := make([]byte, remoteSize)
			copy(want, random(1, 8192))
			copy(want[8192:], random(2, 4096))
			readsAs(t, "replica a", a, want)
		})
	}
}

// Reads of layers (READ_LAYER is not built) go to the local replica when
// there is one, and are refused, naming the remote replica, on an engine
// with none, which drops nothing for it.
func TestLayerReadsAreRefusedWithoutALocalReplica(t *testing.T) {
	e, _, servers := mixedEngine(t)
	addr := servers["b"].addr
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	view, release, err := e.OpenSnapshotForRead("s1", 0, -1)
	if err != nil {
		t.Fatalf("a snapshot read with a local replica: %v", err)
	}
	view.Close()
	release()

	only, err := startEngine(t, "engine-2", 2, nil, map[string]string{"b": addr})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = only.OpenSnapshotForRead("s1", 0, -1)
	if !errors.Is(err, ErrNotCarried) || !errors.Is(err, ErrPrecondition) {
		t.Fatalf("a snapshot read: want ErrNotCarried and ErrPrecondition, got %v", err)
	}
	for _, w := range []string{"reading snapshot s1 on remote replica b", addr, "not carried by the replica protocol yet"} {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("%q does not say %q", err, w)
		}
	}
	if modes := only.ReplicaModes(); modes["b"] != ModeRW {
		t.Fatalf("a refusal dropped the replica: %v", modes)
	}
}

// A remote replica whose server speaks version 1 of the replica protocol
// (its instance manager is older) is told no op that version does not
// know: a snapshot's deletion, a revert, a growth and a purge are refused
// before any replica is touched, each naming itself, the replica, its
// address and the older instance manager; I/O, snapshots and trims go on.
func TestChainChangesAreRefusedOnAReplicaOfAnOlderServer(t *testing.T) {
	a := newReplica(t, remoteSize)
	b := serveReplica(t, "b", newReplica(t, remoteSize))
	c := serveReplica(t, "c", newReplica(t, remoteSize))
	old := serveAsVersion1(t, b.addr)
	e, err := startEngine(t, "engine-1", 1, map[string]*replica.Replica{"a": a}, map[string]string{"b": old.addr, "c": c.addr})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(random(1, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error, words ...string) {
		t.Helper()
		if !errors.Is(err, ErrNotCarried) || !errors.Is(err, ErrPrecondition) {
			t.Fatalf("%s: want ErrNotCarried and ErrPrecondition, got %v", what, err)
		}
		for _, w := range append(words, old.addr, "its instance manager is older", "version 1") {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: %q does not say %q", what, err, w)
			}
		}
	}
	refused("delete", e.DeleteSnapshot("s1"), "deleting snapshot s1 on remote replica b")
	refused("revert", e.RevertSnapshot("s1"), "revert to snapshot s1 on remote replica b")
	refused("expand", e.Expand(2*remoteSize), "grow on remote replica b")
	e.StartPurge()
	for deadline := time.Now().Add(10 * time.Second); e.PurgeStatus().IsPurging && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if st := e.PurgeStatus(); st.State != "error" || !strings.Contains(st.Error, "purge on remote replica b at "+old.addr) || !strings.Contains(st.Error, "instance manager is older") {
		t.Fatalf("purge status %+v", st)
	}
	if err := e.Trim(0, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WriteAt(random(2, 4096), 8192); err != nil {
		t.Fatal(err)
	}
	if modes := e.ReplicaModes(); modes["a"] != ModeRW || modes["b"] != ModeRW || modes["c"] != ModeRW {
		t.Fatalf("a refusal changed the modes: %v", modes)
	}
	if n := old.unknownOps(); n != 0 {
		t.Fatalf("the old server was sent %d ops it does not know", n)
	}
	for name, r := range map[string]*replica.Replica{"a": a, "b": b.r, "c": c.r} {
		if exists, removed := r.SnapshotRemoved("s1"); !exists || removed || r.Size() != remoteSize {
			t.Fatalf("replica %s changed: s1 %v removed %v, size %d", name, exists, removed, r.Size())
		}
	}
	// And the remote replica itself refuses them, were the engine to ask.
	var r Replica
	for _, m := range e.replicas {
		if m.name == "b" {
			r = m.r
		}
	}
	for op, err := range map[string]error{"purge": func() error { _, err := r.Purge(); return err }(), "grow": r.Grow(1 << 30), "revert": r.Revert("s1"), "deleting a snapshot": r.MarkRemoved("s1")} {
		if !errors.Is(err, ErrNotCarried) || !errors.Is(err, replicaproto.ErrOldServer) || !strings.Contains(err.Error(), "remote replica b at "+old.addr) || !strings.Contains(err.Error(), op) {
			t.Fatalf("%s on the remote replica: %v", op, err)
		}
	}
	if n := old.unknownOps(); n != 0 {
		t.Fatalf("the old server was sent %d ops it does not know", n)
	}
}

func TestRemoteReplicasNeedATermAndAReplicaAheadOfItIsNotTaken(t *testing.T) {
	b := serveReplica(t, "b", newReplica(t, remoteSize))
	if _, err := New("vol", nil, nil, nil, Remote("b", b.addr)); err == nil || !strings.Contains(err.Error(), "term") {
		t.Fatalf("remote replicas without a term: %v", err)
	}
	if _, err := startEngine(t, "engine-2", 0, nil, map[string]string{"b": b.addr}); err == nil || !strings.Contains(err.Error(), "above 0") {
		t.Fatalf("a term of 0: %v", err)
	}
	if _, err := startEngine(t, "engine-2", 2, nil, map[string]string{"b": b.addr}); err != nil {
		t.Fatal(err)
	}
	a := newReplica(t, remoteSize)
	if err := a.AcceptTerm(5, "engine-5"); err != nil {
		t.Fatal(err)
	}
	for name, local := range map[string]map[string]*replica.Replica{"remote": nil, "local": {"a": a}} {
		_, err := startEngine(t, "engine-3", 1, local, map[string]string{"b": b.addr})
		if !errors.Is(err, replica.ErrFenced) {
			t.Fatalf("an engine of a term below its %s replica's: want ErrFenced, got %v", name, err)
		}
	}
	if _, err := startEngine(t, "engine-4", 1, nil, map[string]string{"x": b.addr}); err == nil || !strings.Contains(err.Error(), "no replica x") {
		t.Fatalf("a replica its server does not have: %v", err)
	}
	if _, err := startEngine(t, "engine-4", 3, nil, map[string]string{"b": "127.0.0.1:1"}); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("a server that does not answer: %v", err)
	}
}
