package rpc

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
)

// snapshotChunkSize bounds the data of one SnapshotChunk, well under
// gRPC's 4 MiB default message limit.
const snapshotChunkSize = 1 << 20

// SnapshotRead streams the data ranges of a snapshot, holding it (the
// engine refuses its delete) while the stream lasts and for a lease after.
func (s *Server) SnapshotRead(req *pb.SnapshotReadRequest, stream pb.Engine_SnapshotReadServer) error {
	e, err := s.engine(req.Volume)
	if err != nil {
		return err
	}
	size := e.Size()
	end := req.Offset + req.Length
	if req.Length == 0 {
		end = size
	}
	if req.Offset < 0 || req.Length < 0 || req.Offset > size || end > size {
		return status.Errorf(codes.InvalidArgument, "range offset %d length %d: must lie within the volume's %d bytes", req.Offset, req.Length, size)
	}
	// A view of the range asked only: its cost follows the range, so an
	// export that reads a large volume range after range stays linear.
	view, release, err := e.OpenSnapshotForRead(req.Snapshot, req.Offset, end)
	if err != nil {
		return grpcError(err)
	}
	defer release()
	if err := stream.Send(&pb.SnapshotChunk{VolumeSize: size}); err != nil {
		return err
	}
	var sendErr error
	view.DataRuns(req.Offset, end, func(start, stop int64) {
		for off := start; off < stop && sendErr == nil; {
			if err := stream.Context().Err(); err != nil {
				sendErr = status.FromContextError(err).Err()
				return
			}
			// A new buffer each time: gRPC may still hold the last message.
			buf := make([]byte, min(snapshotChunkSize, stop-off))
			if _, err := view.ReadAt(buf, off); err != nil {
				sendErr = status.Errorf(codes.Internal, "read snapshot %s at %d: %v", req.Snapshot, off, err)
				return
			}
			sendErr = stream.Send(&pb.SnapshotChunk{Offset: off, Data: buf})
			off += int64(len(buf))
		}
	})
	return sendErr
}
