package grpcrecover_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/internal/grpcrecover"
)

// panicky answers for any volume but "bad", for which its handlers panic
// (the stream after a first chunk, as a read gone wrong half way would).
type panicky struct{ pb.UnimplementedEngineServer }

func (panicky) VolumeGet(_ context.Context, req *pb.VolumeRequest) (*pb.Volume, error) {
	if req.Volume == "bad" {
		var s []int
		_ = s[len(req.Volume)] // index out of range: a runtime panic, as a bug would be
	}
	return &pb.Volume{Name: req.Volume}, nil
}

func (panicky) SnapshotRead(req *pb.SnapshotReadRequest, stream grpc.ServerStreamingServer[pb.SnapshotChunk]) error {
	if err := stream.Send(&pb.SnapshotChunk{Data: []byte("a")}); err != nil {
		return err
	}
	if req.Volume == "bad" {
		panic("half way")
	}
	return nil
}

func serve(t *testing.T) (pb.EngineClient, *logtest.Hook) {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	g := grpc.NewServer(grpcrecover.ServerOptions(logrus.NewEntry(logger))...)
	pb.RegisterEngineServer(g, panicky{})
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
	return pb.NewEngineClient(conn), hook
}

// checkInternal checks err is codes.Internal saying so, without the stack.
func checkInternal(t *testing.T, err error) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.Internal {
		t.Fatalf("got %v, want codes.Internal", err)
	}
	if msg := st.Message(); !strings.Contains(msg, "internal error") || strings.Contains(msg, "goroutine") || strings.Contains(msg, ".go:") {
		t.Errorf("message %q: want one that says an internal error happened, without the stack", msg)
	}
}

// checkLogged checks one error was logged for the panic in method, with
// the volume and a stack through the handler.
func checkLogged(t *testing.T, hook *logtest.Hook, method, handler string) {
	t.Helper()
	var found []*logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.ErrorLevel {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d errors logged, want 1: %v", len(found), hook.AllEntries())
	}
	e := found[0]
	if e.Data["method"] != method || e.Data["volume"] != "bad" {
		t.Errorf("logged method %v volume %v, want %s and bad", e.Data["method"], e.Data["volume"], method)
	}
	if p, _ := e.Data["panic"].(string); p == "" {
		t.Error("panic value not logged")
	}
	if s, _ := e.Data["stack"].(string); !strings.Contains(s, handler) {
		t.Errorf("logged stack does not go through %s: %q", handler, s)
	}
	hook.Reset()
}

func TestUnaryPanicIsInternal(t *testing.T) {
	client, hook := serve(t)
	ctx := context.Background()
	_, err := client.VolumeGet(ctx, &pb.VolumeRequest{Volume: "bad"})
	checkInternal(t, err)
	checkLogged(t, hook, pb.Engine_VolumeGet_FullMethodName, "panicky.VolumeGet")
	// The server goes on serving, the bad request as much as any other.
	for _, volume := range []string{"good", "bad", "good"} {
		v, err := client.VolumeGet(ctx, &pb.VolumeRequest{Volume: volume})
		if volume == "bad" {
			checkInternal(t, err)
			continue
		}
		if err != nil || v.Name != volume {
			t.Fatalf("VolumeGet(%s) after a panic: %v, %v", volume, v, err)
		}
	}
}

func TestStreamPanicIsInternal(t *testing.T) {
	client, hook := serve(t)
	ctx := context.Background()
	read := func(volume string) (int, error) {
		stream, err := client.SnapshotRead(ctx, &pb.SnapshotReadRequest{Volume: volume})
		if err != nil {
			return 0, err
		}
		n := 0
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				return n, err
			}
			n++
		}
	}
	n, err := read("bad")
	checkInternal(t, err)
	if n != 1 {
		t.Errorf("got %d chunks before the error, want the one sent before the panic", n)
	}
	checkLogged(t, hook, pb.Engine_SnapshotRead_FullMethodName, "panicky.SnapshotRead")
	if n, err := read("good"); err != nil || n != 1 {
		t.Fatalf("SnapshotRead(good) after a panic: %d chunks, %v", n, err)
	}
}
