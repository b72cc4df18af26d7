package manager

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// lyingSender is a peer that declares a file of declared bytes and then
// sends sent bytes: any pod on the network can stand where a manager
// should.
type lyingSender struct {
	pb.UnimplementedBackingImageManagerServer
	declared, sent int64
}

func (l *lyingSender) Send(_ *pb.FileRequest, stream grpc.ServerStreamingServer[pb.SendChunk]) error {
	if err := stream.Send(&pb.SendChunk{Header: &pb.FileHeader{Size: l.declared, Checksum: strings.Repeat("a", 128)}}); err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	for left := l.sent; left > 0; left -= int64(len(chunk)) {
		if err := stream.Send(&pb.SendChunk{Data: chunk[:min(left, int64(len(chunk)))]}); err != nil {
			return err
		}
	}
	return nil
}

func startLyingSender(t *testing.T, declared, sent int64) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(mtlstest.Identity(t).GRPCServerOption())
	pb.RegisterBackingImageManagerServer(g, &lyingSender{declared: declared, sent: sent})
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	return lis.Addr().String()
}

// A Sync takes no more bytes than the sender declared (nor than the caller
// asked for), and does not start when the disk lacks the room: a sender
// that lies cannot fill the disk. The file fails saying why and nothing
// of it stays.
func TestSyncIsBoundedByTheDeclaredSizeAndTheDisksRoom(t *testing.T) {
	m := startManager(t, "", "disk-a", nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name           string
		declared, sent int64
		want           string
	}{
		{"more than declared", 1 << 20, 8 << 20, "more than the 1048576 bytes"},
		{"more than the disk holds", 1 << 60, 1 << 20, "free on the disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			image := strings.ReplaceAll(tc.name, " ", "-")
			if _, err := m.client.Sync(ctx, image, "u1", "", startLyingSender(t, tc.declared, tc.sent), 0); err != nil {
				t.Fatal(err)
			}
			info := waitFile(t, m.client, image)
			if info.State != longhorn.BackingImageStateFailed || !strings.Contains(info.Message, tc.want) {
				t.Fatalf("file: %+v, want failed with %q", info, tc.want)
			}
			var held int64
			filepath.Walk(backingimage.FileFolder(m.disk, image, "u1"), func(_ string, fi os.FileInfo, err error) error {
				if err == nil && !fi.IsDir() {
					held += fi.Size()
				}
				return nil
			})
			if held > 2<<20 {
				t.Fatalf("the failed sync left %d bytes on the disk", held)
			}
		})
	}
}
