package rpc

import (
	"context"
	"errors"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
)

// SetTrimmer says how this node finds and trims a volume's mounted
// filesystem (the CSI Node service's state directory, the host's /proc).
func (s *Server) SetTrimmer(t fstrim.Trimmer) {
	s.mu.Lock()
	s.trimmer = t
	s.mu.Unlock()
}

// FilesystemTrim trims the filesystem mounted from a volume whose engine
// runs here; one with no mounted filesystem on this node is
// FailedPrecondition, saying why.
func (s *Server) FilesystemTrim(ctx context.Context, req *pb.VolumeRequest) (*pb.FilesystemTrimResponse, error) {
	if _, err := s.engine(req.Volume); err != nil {
		return nil, err
	}
	s.mu.RLock()
	tr := s.trimmer
	s.mu.RUnlock()
	return trim(ctx, tr, req.Volume)
}

// trim trims the filesystem mounted from volume on this node.
func trim(ctx context.Context, tr fstrim.Trimmer, volume string) (*pb.FilesystemTrimResponse, error) {
	log := logrus.WithFields(logrus.Fields{"component": "engine-rpc", "volume": volume})
	res, err := tr.Trim(ctx, volume)
	if errors.Is(err, fstrim.ErrNoFilesystem) {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if err != nil {
		log.WithError(err).Warn("Failed to trim the volume's filesystem")
		return nil, status.Error(codes.Internal, err.Error())
	}
	log.WithFields(logrus.Fields{"mountPoint": res.MountPoint, "trimmedBytes": res.Trimmed}).Info("Trimmed the volume's filesystem")
	return &pb.FilesystemTrimResponse{MountPoint: res.MountPoint, TrimmedBytes: res.Trimmed}, nil
}
