package instance

import (
	"bytes"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// node is one node's engines and served replicas, with the replica
// protocol on a loopback port.
type node struct {
	engines *Engines
	served  *Served
	addr    string
}

func newNode(t *testing.T) *node {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	served := NewServed(logrus.NewEntry(log))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := replicaproto.NewServer(served.Lookup, logrus.NewEntry(log))
	go func() { _ = rs.Serve(l, nil) }()
	t.Cleanup(func() { _ = l.Close(); rs.Close(); served.CloseAll() })
	return &node{engines: newTestEngines(), served: served, addr: l.Addr().String()}
}

const servedUID = "uid-of-vol"

// An engine on one node over a replica of its own and one another node
// serves: every write lands on both, a snapshot is taken on both, and
// after the engine stops the served replica holds what was acknowledged.
// A replica created by the serve beside data is behind, never RW.
func TestAnEngineWritesToAReplicaAnotherNodeServes(t *testing.T) {
	a, b := newNode(t), newNode(t)
	const size = 4 << 20
	dirA, dirB := filepath.Join(t.TempDir(), "r1"), filepath.Join(t.TempDir(), "r2")
	if _, err := b.served.Serve("vol", servedUID, ReplicaDir{Name: "r2", Dir: dirB, New: true}, size); err != nil {
		t.Fatal(err)
	}
	run, err := a.engines.Start("vol", size, []ReplicaDir{{Name: "r1", Dir: dirA, New: true}}, false,
		WithTerm(servedUID, 1), WithRemoteReplicas(RemoteReplica{Name: "r2", Address: b.addr, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("acknowledged"), 1000)
	if _, err := run.Engine.WriteAt(data, 8192); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("snap-1", nil); err != nil {
		t.Fatal(err)
	}
	st := run.Engine.Status()
	if st.ReplicaModes["r1"] != volumeengine.ModeRW || st.ReplicaModes["r2"] != volumeengine.ModeRW {
		t.Fatalf("replica modes %v: want both RW", st.ReplicaModes)
	}
	list := b.served.List()
	if len(list) != 1 || list[0].Term != 1 || list[0].Engine != run.ID {
		t.Fatalf("served %+v: want r2 held at term 1 by engine %s", list, run.ID)
	}
	if err := a.engines.Stop("vol"); err != nil {
		t.Fatal(err)
	}
	b.served.Stop("r2")
	r2, err := replica.Open(dirB)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := r2.ReadAt(got, 8192); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the served replica holds %q..., %v; want what was acknowledged", got[:24], err)
	}
	if !r2.HasSnapshot("snap-1") {
		t.Fatal("the served replica has no snap-1")
	}
	r2.Close()

	// Started again over the two, now holding data, with a third one new
	// on b: that one is behind, and the engine reads the others.
	for _, rd := range []ReplicaDir{{Name: "r2", Dir: dirB}, {Name: "r3", Dir: filepath.Join(t.TempDir(), "r3"), New: true}} {
		if _, err := b.served.Serve("vol", servedUID, rd, size); err != nil {
			t.Fatal(err)
		}
	}
	run, err = a.engines.Start("vol", size, []ReplicaDir{{Name: "r1", Dir: dirA}}, false, WithTerm(servedUID, 2),
		WithRemoteReplicas(RemoteReplica{Name: "r2", Address: b.addr}, RemoteReplica{Name: "r3", Address: b.addr, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.engines.Stop("vol")
	if m := run.Engine.Status().ReplicaModes; m["r1"] != volumeengine.ModeRW || m["r2"] != volumeengine.ModeRW || m["r3"] != volumeengine.ModeERR {
		t.Fatalf("replica modes %v: want r1 and r2 RW, r3 (new beside data) ERR", m)
	}
}

// The term fences: an engine started with a higher term on a replica
// that another engine writes to takes it over, and the older engine's
// next write fails at that replica and it serves no more: it marks
// nothing failed, and nothing it writes after lands anywhere.
func TestASecondEngineOnAServedReplicaFencesTheFirst(t *testing.T) {
	a, b, c := newNode(t), newNode(t), newNode(t)
	const size = 1 << 20
	dirA := filepath.Join(t.TempDir(), "r1")
	if _, err := b.served.Serve("vol", servedUID, ReplicaDir{Name: "r2", Dir: filepath.Join(t.TempDir(), "r2"), New: true}, size); err != nil {
		t.Fatal(err)
	}
	first, err := a.engines.Start("vol", size, []ReplicaDir{{Name: "r1", Dir: dirA, New: true}}, false,
		WithTerm(servedUID, 1), WithRemoteReplicas(RemoteReplica{Name: "r2", Address: b.addr, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer a.engines.Stop("vol")
	if _, err := first.Engine.WriteAt([]byte("before"), 0); err != nil {
		t.Fatal(err)
	}
	// A second engine, elsewhere, on the replica b serves (r1 is a's
	// alone: its lock): it takes r2 with term 2.
	second, err := c.engines.Start("vol", size, nil, false, WithTerm(servedUID, 2), WithRemoteReplicas(RemoteReplica{Name: "r2", Address: b.addr}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.engines.Stop("vol")
	_, err = first.Engine.WriteAt([]byte("stale!"), 0)
	if !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("the first engine's write after the second's start = %v; want ErrFenced", err)
	}
	if _, err := first.Engine.WriteAt([]byte("stale!"), 4096); !errors.Is(err, replica.ErrFenced) {
		t.Fatalf("a later write = %v; want ErrFenced", err)
	}
	if st := first.Engine.Status(); st.ReplicaModes["r2"] == volumeengine.ModeERR || st.ReplicaModes["r1"] == volumeengine.ModeERR {
		t.Fatalf("the fenced engine marked a replica failed: %v", st.ReplicaModes)
	}
	got := make([]byte, 6)
	if _, err := second.Engine.ReadAt(got, 0); err != nil || string(got) != "before" {
		t.Fatalf("the second engine reads %q, %v; want what the first acknowledged, and none of its stale writes", got, err)
	}
	if _, err := second.Engine.ReadAt(got, 4096); err != nil || !bytes.Equal(got, make([]byte, 6)) {
		t.Fatalf("the second engine reads %q at 4096, %v; want zeros", got, err)
	}
}

// A serve names what it serves; a name served already as another replica
// is refused; a lookup of another volume's UID or an unknown replica is
// refused; a failed replica is not served; data that is not there is
// never created in its place.
func TestServedRefusesWhatIsNotTheSameReplica(t *testing.T) {
	s := newNode(t).served
	dir := filepath.Join(t.TempDir(), "r1")
	if _, err := s.Serve("vol", servedUID, ReplicaDir{Name: "r1", Dir: dir}, 1<<20); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("serving a replica whose data is missing, not marked new: %v", err)
	}
	if _, err := s.Serve("vol", servedUID, ReplicaDir{Name: "r1", Dir: dir, New: true}, 1<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Serve("vol", servedUID, ReplicaDir{Name: "r1", Dir: dir}, 1<<20); err != nil {
		t.Fatalf("serving the same replica again: %v", err)
	}
	if _, err := s.Serve("vol", "another-uid", ReplicaDir{Name: "r1", Dir: dir}, 1<<20); !errors.Is(err, ErrServedElse) {
		t.Fatalf("serving r1 of another volume UID: %v; want ErrServedElse", err)
	}
	if _, err := s.Serve("vol", servedUID, ReplicaDir{Name: "r9", Dir: filepath.Join(t.TempDir(), "r9"), New: true, Failed: true}, 1<<20); !errors.Is(err, ErrInvalidReplica) {
		t.Fatalf("serving a failed replica: %v; want ErrInvalidReplica", err)
	}
	if _, err := s.Lookup(replicaproto.OpenRequest{VolumeUID: "another-uid", Replica: "r1"}); err == nil {
		t.Fatal("a lookup with another volume's UID found r1")
	}
	if _, err := s.Lookup(replicaproto.OpenRequest{VolumeUID: servedUID, Replica: "r2"}); err == nil {
		t.Fatal("a lookup of a replica not served found one")
	}
	// An engine of this process cannot open a served replica: its lock.
	if _, err := newTestEngines().Start("vol", 1<<20, []ReplicaDir{{Name: "r1", Dir: dir}}, false); err == nil {
		t.Fatal("an engine opened a replica that is served")
	}
}
