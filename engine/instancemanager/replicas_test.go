package instancemanager

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// Two instance managers as two nodes, with mutual TLS: b serves a replica
// over the replica protocol, a starts an engine over a replica of its own
// and b's. A snapshot is taken on both; b lists its replica held by a's
// engine at the start's term; a third instance manager's engine with a
// higher term on b's replica fences a's, whose snapshot then fails with
// the fence (nothing marked failed).
func TestAnInstanceManagerServesAReplicaToAnotherOnesEngine(t *testing.T) {
	tlsDir := mtlstest.Dir(t)
	ims := map[string]*Client{}
	for _, n := range []string{"a", "b", "c"} {
		dir := filepath.Join(t.TempDir(), n)
		serveConfig(t, Config{Dir: dir, FrontendHost: "127.0.0.1", ReplicaAddress: "127.0.0.1:0", TLSDir: tlsDir})
		ims[n] = dial(t, dir)
	}
	data := t.TempDir()
	const size, uid = 4 << 20, "uid-1"
	served, err := ims["b"].ServeReplica("vol", uid, instance.ReplicaDir{Name: "r2", Dir: filepath.Join(data, "r2"), New: true}, size)
	if err != nil {
		t.Fatal(err)
	}
	if served.Address == "" || !strings.HasPrefix(served.Address, "127.0.0.1:") {
		t.Fatalf("served at %q: want b's replica address", served.Address)
	}
	// The same serve again is the same replica; another under its name is
	// refused.
	if again, err := ims["b"].ServeReplica("vol", uid, instance.ReplicaDir{Name: "r2", Dir: filepath.Join(data, "r2")}, size); err != nil || again.Address != served.Address {
		t.Fatalf("serve again = %+v, %v", again, err)
	}
	if _, err := ims["b"].ServeReplica("vol", "uid-2", instance.ReplicaDir{Name: "r2", Dir: filepath.Join(data, "r2")}, size); err == nil || !strings.Contains(err.Error(), "served already") {
		t.Fatalf("serving r2 of another volume: %v", err)
	}
	// Remote replicas need a term.
	if _, err := ims["a"].Start("vol", size, nil, false, instance.WithRemoteReplicas(instance.RemoteReplica{Name: "r2", Address: served.Address})); err == nil || !strings.Contains(err.Error(), "term") {
		t.Fatalf("a start with a remote replica and no term = %v; want a refusal naming the term", err)
	}
	run, err := ims["a"].Start("vol", size, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}, false,
		instance.WithTerm(uid, 1), instance.WithRemoteReplicas(instance.RemoteReplica{Name: "r2", Address: served.Address, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("snap-1", nil); err != nil {
		t.Fatal(err)
	}
	st := run.Engine.Status()
	if st.ReplicaModes["r1"] != volumeengine.ModeRW || st.ReplicaModes["r2"] != volumeengine.ModeRW {
		t.Fatalf("replica modes %v: want both RW", st.ReplicaModes)
	}
	list, addr, err := ims["b"].ListReplicas()
	if err != nil || addr != served.Address || len(list) != 1 || list[0].Term != 1 || list[0].Engine == "" {
		t.Fatalf("b lists %+v at %q, %v: want r2 held at term 1", list, addr, err)
	}

	if _, err := ims["c"].Start("vol", size, nil, false, instance.WithTerm(uid, 2),
		instance.WithRemoteReplicas(instance.RemoteReplica{Name: "r2", Address: served.Address})); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("snap-2", nil); err == nil || !strings.Contains(err.Error(), "fenced") && !strings.Contains(err.Error(), replica.ErrFenced.Error()) {
		t.Fatalf("a's snapshot after c took r2 = %v; want the fence", err)
	}
	if m := run.Engine.Status().ReplicaModes; m["r1"] != volumeengine.ModeRW || m["r2"] != volumeengine.ModeRW {
		t.Fatalf("the fenced engine marked a replica failed: %v", m)
	}
	if err := ims["b"].StopReplica("r2"); err != nil {
		t.Fatal(err)
	}
	if list, _, _ := ims["b"].ListReplicas(); len(list) != 0 {
		t.Fatalf("b still serves %+v", list)
	}
}

// An instance manager started without a replica address serves none, and
// says why.
func TestAnInstanceManagerWithoutAReplicaAddressServesNone(t *testing.T) {
	dir := t.TempDir()
	serve(t, dir)
	c := dial(t, dir)
	_, err := c.ServeReplica("vol", "uid", instance.ReplicaDir{Name: "r1", Dir: filepath.Join(t.TempDir(), "r1"), New: true}, 1<<20)
	if err == nil || !strings.Contains(err.Error(), "--replica-address") {
		t.Fatalf("ServeReplica = %v; want a refusal naming --replica-address", err)
	}
}

// The replica protocol is never served in the clear off loopback: an
// instance manager given an address of the pod network and no TLS folder
// does not start.
func TestAnInstanceManagerRefusesToServeReplicasInTheClear(t *testing.T) {
	err := Serve(t.Context(), Config{Dir: t.TempDir(), FrontendHost: "127.0.0.1", ReplicaAddress: "0.0.0.0:0"}, logrus.NewEntry(logrus.StandardLogger()))
	if err == nil || !strings.Contains(err.Error(), "--tls-dir") {
		t.Fatalf("Serve without TLS on 0.0.0.0 = %v; want a refusal naming --tls-dir", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:0": true, "[::1]:8502": true, "localhost:1": true,
		"[127.0.0.2]:8502": true, "10.0.0.1:8502": false, "[fd00::1]:8502": false, "0.0.0.0:0": false, "nonsense": false} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// The pods' form of the address, the IP bracketed as an IPv6 one needs
// (--replica-address=[$(POD_IP)]:8502), takes an IPv4 one too, and the
// address served and listed is the plain host:port engines dial.
func TestAnInstanceManagerServesAtABracketedAddress(t *testing.T) {
	dir := t.TempDir()
	serveConfig(t, Config{Dir: dir, FrontendHost: "127.0.0.1", ReplicaAddress: "[127.0.0.1]:0", TLSDir: mtlstest.Dir(t)})
	_, address, err := dial(t, dir).ListReplicas()
	if err != nil || !strings.HasPrefix(address, "127.0.0.1:") {
		t.Fatalf("ListReplicas' address = %q, %v; want 127.0.0.1:<port>", address, err)
	}
}
