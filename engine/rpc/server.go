// Package rpc serves the engines of a node over gRPC: the service the
// manager's engineapi client calls.
package rpc

import (
	"context"
	"errors"
	"sync"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
	"github.com/cadence-storage/longhorn-manager/internal/grpcrecover"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// Server holds the engines this node runs, by volume name.
type Server struct {
	pb.UnimplementedEngineServer
	mu      sync.RWMutex
	engines map[string]*volumeengine.Engine
	// policy confines backups and restores (policy.go).
	policy Policy
	// trimmer trims volumes' mounted filesystems (trim.go).
	trimmer fstrim.Trimmer
	// freezer freezes them for their snapshots (freeze.go).
	freezer Freezer
}

// NewServer returns a server with no engines.
func NewServer() *Server { return &Server{engines: map[string]*volumeengine.Engine{}} }

// Register makes an engine reachable under its volume's name.
func (s *Server) Register(e *volumeengine.Engine) {
	s.mu.Lock()
	s.engines[e.Name()] = e
	s.mu.Unlock()
}

// Unregister removes a volume's engine.
func (s *Server) Unregister(volume string) {
	s.mu.Lock()
	delete(s.engines, volume)
	s.mu.Unlock()
}

// callableByRole are the calls a leaf of a narrower role than a
// component's may make: a backing image data source exports a volume's
// snapshot, so it reads the volume's size, the snapshot's record and its
// data, and nothing else (no snapshot made, deleted or reverted, no
// backup, no restore).
var callableByRole = map[string]map[string]bool{
	mtls.RoleDataSource: {pb.Engine_VolumeGet_FullMethodName: true, pb.Engine_SnapshotGet_FullMethodName: true, pb.Engine_SnapshotRead_FullMethodName: true},
}

// GRPCServer returns a gRPC server with the engine service on it. A panic
// in a handler answers codes.Internal and is logged: the node's other
// engines keep being served.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server { return newGRPCServer(s, opts) }

// newGRPCServer serves srv, an engine service, behind the role guard.
func newGRPCServer(srv pb.EngineServer, opts []grpc.ServerOption) *grpc.Server {
	recovery := grpcrecover.ServerOptions(logrus.WithField("component", "engine-rpc"))
	g := grpc.NewServer(append(append(recovery, mtls.RoleGuard(callableByRole)...), opts...)...)
	pb.RegisterEngineServer(g, srv)
	return g
}

func (s *Server) engine(volume string) (*volumeengine.Engine, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.engines[volume]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "volume %q has no engine on this node", volume)
	}
	return e, nil
}

// grpcError turns an engine error into a status with the matching code.
func grpcError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, volumeengine.ErrNotFound), errors.Is(err, replica.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, volumeengine.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, volumeengine.ErrPrecondition):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, volumeengine.ErrNoHealthyReplica):
		return status.Error(codes.Unavailable, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func toPB(s replica.Snapshot) *pb.Snapshot {
	return &pb.Snapshot{Name: s.Name, Parent: s.Parent, Children: s.Children, Removed: s.Removed,
		UserCreated: s.UserCreated, Created: s.Created, Size: s.Size, Labels: s.Labels}
}

func (s *Server) VolumeGet(_ context.Context, req *pb.VolumeRequest) (*pb.Volume, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	modes := map[string]string{}
	for name, m := range e.ReplicaModes() {
		modes[name] = string(m)
	}
	return &pb.Volume{Name: e.Name(), Size: e.Size(), ReplicaModes: modes}, nil
}

func (s *Server) SnapshotCreate(ctx context.Context, req *pb.SnapshotCreateRequest) (*pb.SnapshotCreateResponse, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	f := s.freezer
	s.mu.RUnlock()
	var name string
	err = frozen(ctx, f, req.Volume, func() error {
		var err error
		if name, err = e.CreateSnapshot(req.Name, req.Labels); err != nil {
			return grpcError(err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &pb.SnapshotCreateResponse{Name: name}, nil
}

func (s *Server) SnapshotList(_ context.Context, req *pb.VolumeRequest) (*pb.SnapshotListResponse, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	list, err := e.Snapshots()
	if err != nil {
		return nil, grpcError(err)
	}
	out := &pb.SnapshotListResponse{}
	for _, snap := range list {
		out.Snapshots = append(out.Snapshots, toPB(snap))
	}
	return out, nil
}

func (s *Server) SnapshotGet(_ context.Context, req *pb.SnapshotRequest) (*pb.Snapshot, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	snap, err := e.Snapshot(req.Name)
	if err != nil {
		return nil, grpcError(err)
	}
	return toPB(snap), nil
}

func (s *Server) SnapshotDelete(_ context.Context, req *pb.SnapshotRequest) (*pb.Empty, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, grpcError(e.DeleteSnapshot(req.Name))
}

func (s *Server) SnapshotRevert(_ context.Context, req *pb.SnapshotRequest) (*pb.Empty, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, grpcError(e.RevertSnapshot(req.Name))
}

func (s *Server) SnapshotPurge(_ context.Context, req *pb.VolumeRequest) (*pb.Empty, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	e.StartPurge()
	return &pb.Empty{}, nil
}

func (s *Server) SnapshotPurgeStatus(_ context.Context, req *pb.VolumeRequest) (*pb.PurgeStatus, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	st := e.PurgeStatus()
	return &pb.PurgeStatus{IsPurging: st.IsPurging, Progress: int32(st.Progress), State: st.State, Error: st.Error}, nil
}

func (s *Server) BackupCreate(ctx context.Context, req *pb.BackupCreateRequest) (*pb.BackupCreateResponse, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	if err := checkLabels(req.Labels); err != nil {
		return nil, err
	}
	cred, err := s.getPolicy().checkTarget(ctx, req.Target, req.Credential)
	if err != nil {
		return nil, err
	}
	store, err := backupstore.OpenWithCredential(req.Target, cred)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := store.SetBackupDefaults(req.CompressionMethod, int(req.ConcurrentLimit)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	name := req.Name
	if name == "" {
		name = backupstore.NewBackupName()
	}
	var opts []volumeengine.BackupOption
	if req.Full {
		opts = append(opts, volumeengine.FullBackup())
	}
	if err := e.StartBackup(name, req.Snapshot, store, req.Labels, opts...); err != nil {
		return nil, grpcError(err)
	}
	return &pb.BackupCreateResponse{Name: name}, nil
}

func (s *Server) BackupStatus(_ context.Context, req *pb.VolumeRequest) (*pb.BackupStatusResponse, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	out := &pb.BackupStatusResponse{Backups: map[string]*pb.BackupStatus{}}
	for name, st := range e.BackupStatuses() {
		out.Backups[name] = &pb.BackupStatus{Snapshot: st.Snapshot, Progress: int32(st.Progress), State: st.State, Url: st.URL, Error: st.Error}
	}
	return out, nil
}

func (s *Server) Restore(ctx context.Context, req *pb.RestoreRequest) (*pb.Empty, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	target, volume, backup, err := backupstore.ParseURL(req.BackupUrl)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	policy := s.getPolicy()
	cred, err := policy.checkTarget(ctx, target, req.Credential)
	if err != nil {
		return nil, err
	}
	if err := policy.checkRestore(ctx, req.Volume, req.BackupUrl); err != nil {
		return nil, err
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := e.Restore(ctx, store, volume, backup); err != nil {
		if errors.Is(err, backupstore.ErrNotExist) {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		return nil, grpcError(err)
	}
	return &pb.Empty{}, nil
}

func (s *Server) RestoreStatus(_ context.Context, req *pb.VolumeRequest) (*pb.RestoreStatusResponse, error) {
	e, err := s.engine(req.Volume)
	if err != nil {
		return nil, err
	}
	st := e.RestoreStatus()
	return &pb.RestoreStatusResponse{IsRestoring: st.IsRestoring, Progress: int32(st.Progress), State: st.State, Error: st.Error,
		LastRestored: st.LastRestored, BackupUrl: st.BackupURL}, nil
}
