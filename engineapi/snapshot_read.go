package engineapi

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
)

// SnapshotRead reads what snapshot holds at [off, off+len(p)) into p, in
// one streaming call under the client's per-call deadline: the engine
// sends only the ranges that may hold data, and the rest of p is zeroed.
// It returns the volume's size. The engine holds the snapshot (refuses its
// delete) during the call and for a lease after, so an export that reads
// range after range keeps it.
func (c *GRPCClient) SnapshotRead(ctx context.Context, snapshot string, p []byte, off int64) (int64, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	op := fmt.Sprintf("read of snapshot %s at %d+%d", snapshot, off, len(p))
	stream, err := c.client.SnapshotRead(ctx, snapshotReadRequest(c.volume, snapshot, off, int64(len(p))))
	if err != nil {
		return 0, c.wrap(op, err)
	}
	first, err := stream.Recv()
	if err != nil {
		return 0, c.wrap(op, err)
	}
	size := first.VolumeSize
	clear(p)
	end := off + int64(len(p))
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return size, nil
		}
		if err != nil {
			return 0, c.wrap(op, err)
		}
		if chunk.Offset < off || chunk.Offset+int64(len(chunk.Data)) > end {
			return 0, fmt.Errorf("%s on the engine of volume %s at %s: %w: the engine sent %d bytes at %d, outside the range",
				op, c.volume, c.address, ErrUnavailable, len(chunk.Data), chunk.Offset)
		}
		copy(p[chunk.Offset-off:], chunk.Data)
	}
}

func snapshotReadRequest(volume, snapshot string, off, length int64) *pb.SnapshotReadRequest {
	return &pb.SnapshotReadRequest{Volume: volume, Snapshot: snapshot, Offset: off, Length: length}
}
