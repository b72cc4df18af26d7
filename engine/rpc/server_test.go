package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// A handler that panics for one volume answers codes.Internal, and the
// server, with this node's other engines, goes on serving.
func TestHandlerPanicIsInternal(t *testing.T) {
	srv := NewServer()
	// A nil engine: every handler of this volume panics.
	srv.engines["broken"] = (*volumeengine.Engine)(nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer()
	go g.Serve(l)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	client := pb.NewEngineClient(conn)
	ctx := context.Background()

	for i := 0; i < 2; i++ {
		_, err := client.VolumeGet(ctx, &pb.VolumeRequest{Volume: "broken"})
		if status.Code(err) != codes.Internal {
			t.Fatalf("VolumeGet(broken): %v, want codes.Internal", err)
		}
		stream, err := client.SnapshotRead(ctx, &pb.SnapshotReadRequest{Volume: "broken", Snapshot: "s"})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.Internal || errors.Is(err, io.EOF) {
			t.Fatalf("SnapshotRead(broken): %v, want codes.Internal", err)
		}
		if _, err := client.VolumeGet(ctx, &pb.VolumeRequest{Volume: "other"}); status.Code(err) != codes.NotFound {
			t.Fatalf("VolumeGet(other) after a panic: %v, want the server serving (NotFound)", err)
		}
	}
}
