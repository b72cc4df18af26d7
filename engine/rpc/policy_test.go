package rpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/rpctest"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
)

// servePolicy serves engines with policy p and returns a client.
func servePolicy(t *testing.T, p rpc.Policy, engines ...*volumeengine.Engine) pb.EngineClient {
	t.Helper()
	srv := rpc.NewServer()
	srv.SetPolicy(p)
	for _, e := range engines {
		srv.Register(e)
	}
	return serveGRPC(t, srv.GRPCServer())
}

// serveForwarded serves engines as a node with an instance manager does:
// the engines' own service checks nothing, and a Forwarder with policy p
// in front of it is what the client reaches.
func serveForwarded(t *testing.T, p rpc.Policy, engines ...*volumeengine.Engine) pb.EngineClient {
	t.Helper()
	inner := rpc.NewServer()
	for _, e := range engines {
		inner.Register(e)
	}
	to := serveGRPC(t, inner.GRPCServer())
	return serveGRPC(t, rpc.NewForwarder(func(string) pb.EngineClient { return to }, p, fstrim.Trimmer{}).GRPCServer())
}

func serveGRPC(t *testing.T, g *grpc.Server) pb.EngineClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewEngineClient(conn)
}

// policyServers are the two ways a node serves its engines with the
// policy: in the manager's process, or forwarded to an instance manager.
var policyServers = map[string]func(*testing.T, rpc.Policy, ...*volumeengine.Engine) pb.EngineClient{
	"in-process": servePolicy,
	"forwarded":  serveForwarded,
}

func wantCode(t *testing.T, what string, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(status.Convert(err).Message(), f) {
			t.Errorf("%s: %q does not say %q", what, status.Convert(err).Message(), f)
		}
	}
}

// A hostile client of the engine service can neither send a volume's
// backup to a target of its own (reading the volume out) nor restore
// from one (writing over a volume), nor restore into a volume the
// manager is not restoring.
func TestEnginePolicyConfinesBackupsToTheConfiguredTarget(t *testing.T) {
	for name, serve := range policyServers {
		t.Run(name, func(t *testing.T) { testEnginePolicy(t, serve) })
	}
}

func testEnginePolicy(t *testing.T, servePolicy func(*testing.T, rpc.Policy, ...*volumeengine.Engine) pb.EngineClient) {
	ctx := context.Background()
	target := "file://" + t.TempDir()
	elsewhere := "file://" + t.TempDir()
	src := rpctest.Engine(t, "vol", 4<<20, clock.RealClock{}, "r1")
	if _, err := src.WriteAt([]byte("data"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := src.CreateSnapshot("s1", nil); err != nil {
		t.Fatal(err)
	}
	dst := rpctest.Engine(t, "restored", 4<<20, clock.RealClock{}, "r1")
	live := rpctest.Engine(t, "live", 4<<20, clock.RealClock{}, "r1")
	restoring := map[string]bool{"restored": true}
	c := servePolicy(t, rpc.Policy{
		BackupTarget: func(_ context.Context, location string) (string, map[string]string, error) {
			if backupstore.SameTarget(location, target+"/") {
				return target + "/", nil, nil
			}
			return "", nil, nil
		},
		RestoreAllowed: func(_ context.Context, volume, _ string) error {
			if !restoring[volume] {
				return errors.New("volume " + volume + " is not being restored from a backup")
			}
			return nil
		},
	}, src, dst, live)

	_, err := c.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: "vol", Snapshot: "s1", Target: elsewhere})
	wantCode(t, "backup to another target", err, codes.PermissionDenied, elsewhere, "backup-target")
	_, err = c.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: "vol", Snapshot: "s1", Target: target + "/../x"})
	wantCode(t, "backup to a path out of the target", err, codes.PermissionDenied, "backup-target")
	long := map[string]string{"k": strings.Repeat("v", 2000)}
	_, err = c.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: "vol", Snapshot: "s1", Target: target, Labels: long})
	wantCode(t, "backup with an oversized label", err, codes.InvalidArgument, "labels", "at most 1024 bytes")
	res, err := c.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: "vol", Name: "b1", Snapshot: "s1", Target: target})
	if err != nil || res.Name != "b1" {
		t.Fatalf("backup to the configured target: %v", err)
	}
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		st, err := c.BackupStatus(ctx, &pb.VolumeRequest{Volume: "vol"})
		if err != nil {
			t.Fatal(err)
		}
		if b := st.Backups["b1"]; b != nil && b.State == volumeengine.BackupStateCompleted {
			url = b.Url
		}
	}
	if url == "" {
		t.Fatal("the backup did not complete")
	}

	_, err = c.Restore(ctx, &pb.RestoreRequest{Volume: "restored", BackupUrl: elsewhere + "?backup=b1&volume=vol"})
	wantCode(t, "restore from another target", err, codes.PermissionDenied, "backup-target")
	_, err = c.Restore(ctx, &pb.RestoreRequest{Volume: "live", BackupUrl: url})
	wantCode(t, "restore into a volume not being restored", err, codes.FailedPrecondition, "live is not being restored")
	if _, err := c.Restore(ctx, &pb.RestoreRequest{Volume: "restored", BackupUrl: url}); err != nil {
		t.Fatalf("restore into the volume being restored: %v", err)
	}

	// With no backup target configured, no backup goes anywhere.
	none := servePolicy(t, rpc.Policy{BackupTarget: func(context.Context, string) (string, map[string]string, error) {
		return "", nil, rpc.ErrNoBackupTarget
	}},
		rpctest.Engine(t, "vol", 4<<20, clock.RealClock{}, "r1"))
	_, err = none.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: "vol", Snapshot: "s1", Target: target})
	wantCode(t, "backup with no target configured", err, codes.FailedPrecondition, "no backup target")
}
