package instance

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// An engine over a replica of its own and one that another node serves
// over mutual TLS (ServeReplicas, components only) deletes a snapshot,
// purges it, reverts and grows on both: the served replica's chain and
// size are the engine's own replica's.
func TestChainChangesReachAReplicaAnotherNodeServes(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	id := mtlstest.Identity(t)
	b, err := ServeReplicas("127.0.0.1:0", id.ServerConfig(), logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const size = 4 << 20
	dirA := filepath.Join(t.TempDir(), "r1")
	served, err := b.ServeReplica("vol", servedUID, ReplicaDir{Name: "r2", Dir: filepath.Join(t.TempDir(), "r2"), New: true}, size)
	if err != nil {
		t.Fatal(err)
	}
	engines := newTestEngines()
	run, err := engines.Start("vol", size, []ReplicaDir{{Name: "r1", Dir: dirA, New: true}}, false,
		WithTerm(servedUID, 1), WithReplicaTLS(id.ClientConfig()), WithRemoteReplicas(RemoteReplica{Name: "r2", Address: served.Address, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer engines.Stop("vol")
	e := run.Engine
	first, second := bytes.Repeat([]byte("first!!!"), 1024), bytes.Repeat([]byte("second!!"), 512)
	if _, err := e.WriteAt(first, 0); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"snap-1", "snap-2"} {
		if _, err := e.CreateSnapshot(n, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.WriteAt(second, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.DeleteSnapshot("snap-1"); err != nil {
		t.Fatal(err)
	}
	e.StartPurge()
	for deadline := time.Now().Add(10 * time.Second); e.PurgeStatus().IsPurging && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if st := e.PurgeStatus(); st.State != "complete" {
		t.Fatalf("purge %+v", st)
	}
	if err := e.RevertSnapshot("snap-2"); err != nil {
		t.Fatal(err)
	}
	if err := e.Expand(2 * size); err != nil {
		t.Fatal(err)
	}
	if m := e.Status().ReplicaModes; m["r1"] != volumeengine.ModeRW || m["r2"] != volumeengine.ModeRW {
		t.Fatalf("replica modes %v", m)
	}
	looked, err := b.Lookup(replicaproto.OpenRequest{VolumeUID: servedUID, Replica: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	r2 := looked.(*replica.Replica)
	list, err := r2.Snapshots()
	if err != nil || len(list) != 2 || list[0].Name != "snap-2" || r2.Size() != 2*size {
		t.Fatalf("the served replica: chain %+v (%v), %d bytes", list, err, r2.Size())
	}
	want := make([]byte, 2*size)
	copy(want, first)
	copy(want, second)
	got := make([]byte, len(want))
	if _, err := r2.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the served replica does not read what snap-2 held (%v)", err)
	}
	if _, err := e.ReadAt(got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the engine does not read what snap-2 held (%v)", err)
	}
}
