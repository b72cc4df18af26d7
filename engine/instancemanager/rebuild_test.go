package instancemanager

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// Two instance managers as two nodes, with mutual TLS: a's engine over a
// replica of its own and one b serves gets a third, new one b serves
// rebuilt into it through a's Rebuild call, then a fourth of a's own;
// the engine's status follows each to RW.
func TestAReplicaIsRebuiltThroughTheInstanceManager(t *testing.T) {
	tlsDir := mtlstest.Dir(t)
	ims := map[string]*Client{}
	for _, n := range []string{"a", "b"} {
		dir := filepath.Join(t.TempDir(), n)
		serveConfig(t, Config{Dir: dir, FrontendHost: "127.0.0.1", ReplicaAddress: "127.0.0.1:0", TLSDir: tlsDir})
		ims[n] = dial(t, dir)
	}
	data := t.TempDir()
	const size, uid = 4 << 20, "uid-1"
	r2, err := ims["b"].ServeReplica("vol", uid, instance.ReplicaDir{Name: "r2", Dir: filepath.Join(data, "r2"), New: true}, size)
	if err != nil {
		t.Fatal(err)
	}
	r3, err := ims["b"].ServeReplica("vol", uid, instance.ReplicaDir{Name: "r3", Dir: filepath.Join(data, "r3"), New: true}, size)
	if err != nil {
		t.Fatal(err)
	}
	run, err := ims["a"].Start("vol", size, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}, false,
		instance.WithTerm(uid, 1), instance.WithRemoteReplicas(instance.RemoteReplica{Name: "r2", Address: r2.Address, New: true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("snap-1", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	if err := run.Engine.StartRebuild(instance.RebuildReplica{Name: "r3", Dir: "x", Address: r3.Address}, ""); !errors.Is(err, volumeengine.ErrInvalid) {
		t.Fatalf("a replica named by both its folder and its address: %v", err)
	}
	for _, rr := range []instance.RebuildReplica{{Name: "r3", Address: r3.Address}, {Name: "r4", Dir: filepath.Join(data, "r4")}} {
		if err := run.Engine.StartRebuild(rr, "r2"); err != nil {
			t.Fatal(err)
		}
		eventually(t, "replica "+rr.Name+" rebuilt", func() bool {
			st := run.Engine.Status()
			rb := st.Rebuilds[rr.Name]
			return !rb.IsRebuilding && rb.State == "complete" && rb.FromReplica == "r2" && st.ReplicaModes[rr.Name] == volumeengine.ModeRW
		})
	}
	if _, err := run.Engine.CreateSnapshot("snap-2", nil); err != nil {
		t.Fatal(err)
	}
	if m := run.Engine.Status().ReplicaModes; len(m) != 4 {
		t.Fatalf("modes %v", m)
	}
}

// oldInstanceManager answers Rebuild as an instance manager of a version
// before it does: UNIMPLEMENTED.
type oldInstanceManager struct{ pb.InstanceManagerClient }

func (oldInstanceManager) Rebuild(context.Context, *pb.RebuildRequest, ...grpc.CallOption) (*pb.Empty, error) {
	return nil, status.Error(codes.Unimplemented, "unknown method Rebuild for service longhorn.instancemanager.v1.InstanceManager")
}

// The manager can tell an instance manager too old to rebuild.
func TestAnOlderInstanceManagerCannotRebuild(t *testing.T) {
	e := newRemoteEngine(&Client{im: oldInstanceManager{}}, &pb.Instance{Volume: "vol", Id: "e1"})
	if err := e.StartRebuild(instance.RebuildReplica{Name: "r3", Address: "127.0.0.1:1"}, ""); !errors.Is(err, ErrUnimplemented) {
		t.Fatalf("a rebuild on an older instance manager: %v; want ErrUnimplemented", err)
	}
}
