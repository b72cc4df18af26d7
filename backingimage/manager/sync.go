package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// sendChunk is the size of the data in one SendChunk, well under gRPC's
// default 4 MiB message limit.
const sendChunk = 1 << 20

// Sync receives a file from the manager at from_address, or reuses the
// file on the disk when its checksum matches.
func (s *Server) Sync(_ context.Context, req *pb.SyncRequest) (*pb.FileInfo, error) {
	if req.FromAddress == "" {
		return nil, invalid(errors.New("from_address: required, the address of a manager whose file is ready"))
	}
	if req.Size < 0 {
		return nil, invalid(fmt.Errorf("size %d: must not be negative", req.Size))
	}
	return s.start(req.Name, req.Uuid, req.Checksum, func(ctx context.Context, log logrus.FieldLogger) error {
		if ok, err := s.reuse(ctx, log, req.Name, req.Uuid, req.Checksum); ok || err != nil {
			return err
		}
		return s.syncFrom(ctx, log, req)
	})
}

// syncFrom streams the file from the sender; a sender already sending as
// many files as it may is asked again until SyncRetryFor has passed.
func (s *Server) syncFrom(ctx context.Context, log logrus.FieldLogger, req *pb.SyncRequest) error {
	conn, err := grpc.NewClient(req.FromAddress, s.cfg.TLS.GRPCDialOption(),
		// Windows large enough that the stream is never waiting for a window update.
		grpc.WithInitialWindowSize(8<<20), grpc.WithInitialConnWindowSize(16<<20))
	if err != nil {
		return fmt.Errorf("sync from %s: %w", req.FromAddress, err)
	}
	defer conn.Close()
	peer := pb.NewBackingImageManagerClient(conn)
	giveUp := time.Now().Add(s.cfg.SyncRetryFor)
	var stream grpc.ServerStreamingClient[pb.SendChunk]
	var first *pb.SendChunk
	for {
		stream, err = peer.Send(ctx, &pb.FileRequest{Name: req.Name, Uuid: req.Uuid})
		if err == nil {
			first, err = stream.Recv()
		}
		if status.Code(err) != codes.ResourceExhausted || time.Now().After(giveUp) {
			break
		}
		msg := fmt.Sprintf("waiting for the sender at %s: %s", req.FromAddress, status.Convert(err).Message())
		s.update(req.Name, req.Uuid, func(i *pb.FileInfo) { i.Message = msg })
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.SyncRetryInterval):
		}
	}
	if err != nil {
		return fmt.Errorf("sync from %s: %s", req.FromAddress, status.Convert(err).Message())
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return fmt.Errorf("sync from %s: the sender sent no header", req.FromAddress)
	}
	want := req.Checksum
	if want != "" && hdr.Checksum != want {
		return fmt.Errorf("sync from %s: %w: the sender's file hashes to %s, want %s", req.FromAddress, backingimage.ErrChecksumMismatch, hdr.Checksum, want)
	}
	if want == "" {
		want = hdr.Checksum
	}
	if req.Size > 0 && hdr.Size != req.Size {
		return fmt.Errorf("sync from %s: %w: the sender's file holds %d bytes, want %d", req.FromAddress, backingimage.ErrSizeMismatch, hdr.Size, req.Size)
	}
	s.update(req.Name, req.Uuid, func(i *pb.FileInfo) {
		i.State, i.Size, i.Message = string(longhorn.BackingImageStateInProgress), hdr.Size, ""
	})
	sum, err := s.receive(ctx, req.Name, req.Uuid, &chunkReader{stream: stream}, hdr.Size, want)
	if err != nil {
		return fmt.Errorf("sync from %s: %w", req.FromAddress, err)
	}
	s.markReady(log, req.Name, req.Uuid, hdr.Size, sum, "synced from "+req.FromAddress)
	return nil
}

// chunkReader reads the data of a Send stream.
type chunkReader struct {
	stream grpc.ServerStreamingClient[pb.SendChunk]
	buf    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		c, err := r.stream.Recv()
		if err == io.EOF {
			return 0, io.EOF
		}
		if err != nil {
			return 0, errors.New(status.Convert(err).Message())
		}
		r.buf = c.Data
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Send streams a ready file: its header, then its bytes.
func (s *Server) Send(req *pb.FileRequest, stream grpc.ServerStreamingServer[pb.SendChunk]) error {
	if err := backingimage.ValidateName(req.Name); err != nil {
		return invalid(err)
	}
	if err := backingimage.ValidateUUID(req.Uuid); err != nil {
		return invalid(err)
	}
	if err := s.checkDisk(); err != nil {
		return err
	}
	s.mu.Lock()
	f, ok := s.files[req.Name]
	if !ok || f.info.Uuid != req.Uuid || f.info.State != string(longhorn.BackingImageStateReady) {
		s.mu.Unlock()
		return status.Errorf(codes.FailedPrecondition, "send backing image %s (uuid %s): no ready file of it on disk %s", req.Name, req.Uuid, s.cfg.DiskUUID)
	}
	select {
	case s.sends <- struct{}{}:
	default:
		s.mu.Unlock()
		return status.Errorf(codes.ResourceExhausted, "the manager of disk %s sends %d files already, the most at once", s.cfg.DiskUUID, cap(s.sends))
	}
	f.sending++
	f.info.Sending = int32(f.sending)
	size, sum := f.info.Size, f.info.CurrentChecksum
	s.notifyLocked()
	s.mu.Unlock()
	defer func() {
		<-s.sends
		s.mu.Lock()
		f.sending--
		f.info.Sending = int32(f.sending)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	log := s.log.WithFields(logrus.Fields{"backingImage": req.Name, "uuid": req.Uuid})
	log.Info("Sending a backing image file to another manager")

	data, err := os.Open(filepath.Join(s.folder(req.Name, req.Uuid), backingimage.DataFile))
	if err != nil {
		return status.Errorf(codes.Internal, "send backing image %s: %v", req.Name, err)
	}
	defer data.Close()
	if err := stream.Send(&pb.SendChunk{Header: &pb.FileHeader{Size: size, Checksum: sum}}); err != nil {
		return err
	}
	for {
		// A fresh buffer per message: gRPC may still hold the last one.
		buf := make([]byte, sendChunk)
		n, err := io.ReadFull(data, buf)
		if n > 0 {
			if serr := stream.Send(&pb.SendChunk{Data: buf[:n]}); serr != nil {
				log.WithError(serr).Warn("Sending a backing image file stopped")
				return serr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return status.Errorf(codes.Internal, "send backing image %s: read: %v", req.Name, err)
		}
	}
}
