// Package manager is the backing image manager: the gRPC service
// (backingimage/rpc/manager.proto) that owns the backing image files of
// one disk under <disk>/backing-images/<name>-<uuid>/, and its Client.
//
// A file is complete when its data file exists: the data is written to a
// temporary file, checked against the expected SHA512, synced, and only
// then renamed into place (its record, backing.cfg, is written just
// before). So whatever a crash or a cut-off transfer leaves, nothing
// half-written is ever listed ready. Every call that touches files first
// checks that the disk still has the UUID the manager was started for.
package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/internal/grpcrecover"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// The API versions this server speaks.
const (
	APIVersion    = 1
	APIMinVersion = 1
)

// DefaultMaxSends is how many files a manager sends to peers at once.
const DefaultMaxSends = 3

// InUseFunc says which replicas (or other users) use a file; Delete is
// refused while the list is not empty. The replica side provides it.
type InUseFunc func(name, uuid string) ([]string, error)

// Config is the disk a manager owns and how it works.
type Config struct {
	DiskPath string
	DiskUUID string
	// InUse guards Delete; nil means no file is ever in use.
	InUse InUseFunc
	// MaxSends bounds concurrent Sends; DefaultMaxSends when zero.
	MaxSends int
	// SyncRetryInterval is how often a Sync asks a busy sender again, and
	// SyncRetryFor how long it keeps asking before the file fails.
	SyncRetryInterval time.Duration
	SyncRetryFor      time.Duration
	// TLS is the server's identity: what it serves with, and what it
	// calls peers (Sync) and data sources (Fetch) with. Required.
	TLS *mtls.Identity
	Log logrus.FieldLogger
}

// file is one backing image file the manager knows.
type file struct {
	info    *pb.FileInfo
	cancel  context.CancelFunc
	done    chan struct{} // closed when the fetch or sync ends; nil when none ran
	sending int
}

// Server is the manager of one disk.
type Server struct {
	pb.UnimplementedBackingImageManagerServer
	cfg   Config
	log   logrus.FieldLogger
	sends chan struct{}

	mu       sync.Mutex
	files    map[string]*file // by backing image name
	watchers map[chan struct{}]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// New checks the disk and returns its manager. Folders left by an earlier
// manager are kept when they hold a complete file (listed unknown until a
// Fetch or Sync verifies them) and removed when they do not.
func New(cfg Config) (*Server, error) {
	if cfg.DiskPath == "" || cfg.DiskUUID == "" {
		return nil, errors.New("disk path and disk UUID: both are required")
	}
	if err := backingimage.CheckDisk(cfg.DiskPath, cfg.DiskUUID); err != nil {
		return nil, err
	}
	if cfg.MaxSends <= 0 {
		cfg.MaxSends = DefaultMaxSends
	}
	if cfg.SyncRetryInterval <= 0 {
		cfg.SyncRetryInterval = time.Second
	}
	if cfg.SyncRetryFor <= 0 {
		cfg.SyncRetryFor = 5 * time.Minute
	}
	if cfg.TLS == nil {
		return nil, errors.New("an internal TLS identity is required")
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	s := &Server{
		cfg: cfg, log: cfg.Log.WithFields(logrus.Fields{"diskUUID": cfg.DiskUUID, "diskPath": cfg.DiskPath}),
		sends: make(chan struct{}, cfg.MaxSends),
		files: map[string]*file{}, watchers: map[chan struct{}]struct{}{},
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	return s, nil
}

// load registers the complete files already on the disk.
func (s *Server) load() error {
	root := filepath.Join(s.cfg.DiskPath, backingimage.FilesFolder)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		folder := filepath.Join(root, e.Name())
		meta, err := backingimage.ReadMeta(folder)
		if err == nil && e.IsDir() && backingimage.FolderName(meta.Name, meta.UUID) == e.Name() &&
			backingimage.ValidateFile(meta.Name, meta.UUID, meta.Checksum) == nil {
			s.files[meta.Name] = &file{info: &pb.FileInfo{
				Name: meta.Name, Uuid: meta.UUID, Size: meta.Size, CurrentChecksum: meta.Checksum,
				State: string(longhorn.BackingImageStateUnknown), Message: "found on the disk; not verified since the manager started",
			}}
			s.log.WithFields(logrus.Fields{"backingImage": meta.Name, "uuid": meta.UUID}).Info("Found a backing image file on the disk")
			continue
		}
		s.log.WithField("folder", folder).WithError(err).Warn("Removing a folder that holds no complete backing image file")
		if err := os.RemoveAll(folder); err != nil {
			return err
		}
	}
	return nil
}

// GRPCServer returns a gRPC server with the service on it. A panic in a
// handler answers codes.Internal and is logged: the disk's other files
// keep being served.
// It requires mutual TLS with the server's identity.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	opts = append([]grpc.ServerOption{s.cfg.TLS.GRPCServerOption()}, opts...)
	// A data source's leaf calls no backing image manager.
	g := grpc.NewServer(append(append(grpcrecover.ServerOptions(s.log), mtls.RoleGuard(nil)...), opts...)...)
	pb.RegisterBackingImageManagerServer(g, s)
	return g
}

// Close stops every fetch and sync and waits for them; their files end
// failed and nothing half-written stays on the disk.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	for _, f := range s.files {
		if f.cancel != nil {
			f.cancel()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// notify wakes every watcher; a watcher that has a wake-up pending keeps
// one, so bursts coalesce but a change is never missed.
func (s *Server) notifyLocked() {
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// update changes a file's info under the lock and notifies when it changed.
func (s *Server) update(name, uuid string, change func(*pb.FileInfo)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[name]
	if !ok || f.info.Uuid != uuid {
		return
	}
	before := clone(f.info)
	change(f.info)
	if !proto.Equal(before, f.info) {
		s.notifyLocked()
	}
}

func (s *Server) checkDisk() error {
	if err := backingimage.CheckDisk(s.cfg.DiskPath, s.cfg.DiskUUID); err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return nil
}

func invalid(err error) error { return status.Error(codes.InvalidArgument, err.Error()) }

func clone(info *pb.FileInfo) *pb.FileInfo { return proto.Clone(info).(*pb.FileInfo) }

func (s *Server) VersionGet(context.Context, *pb.Empty) (*pb.VersionResponse, error) {
	return &pb.VersionResponse{Version: APIVersion, MinVersion: APIMinVersion}, nil
}

func (s *Server) Get(_ context.Context, req *pb.FileRequest) (*pb.FileInfo, error) {
	if err := backingimage.ValidateName(req.Name); err != nil {
		return nil, invalid(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[req.Name]
	if !ok || (req.Uuid != "" && f.info.Uuid != req.Uuid) {
		return nil, status.Errorf(codes.NotFound, "backing image %s (uuid %q) has no file on disk %s", req.Name, req.Uuid, s.cfg.DiskUUID)
	}
	return clone(f.info), nil
}

func (s *Server) List(context.Context, *pb.Empty) (*pb.ListResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &pb.ListResponse{Files: map[string]*pb.FileInfo{}}
	for name, f := range s.files {
		out.Files[name] = clone(f.info)
	}
	return out, nil
}

// Delete removes a file unless it is in use or being sent; a file the
// manager does not know is deleted from the disk all the same, so a
// repeated Delete succeeds.
func (s *Server) Delete(_ context.Context, req *pb.FileRequest) (*pb.Empty, error) {
	if err := backingimage.ValidateName(req.Name); err != nil {
		return nil, invalid(err)
	}
	if err := backingimage.ValidateUUID(req.Uuid); err != nil {
		return nil, invalid(err)
	}
	if err := s.checkDisk(); err != nil {
		return nil, err
	}
	log := s.log.WithFields(logrus.Fields{"backingImage": req.Name, "uuid": req.Uuid})
	if s.cfg.InUse != nil {
		users, err := s.cfg.InUse(req.Name, req.Uuid)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "delete backing image %s: cannot tell whether it is in use: %v", req.Name, err)
		}
		if len(users) > 0 {
			log.WithField("users", users).Info("Refused to delete a backing image file in use")
			return nil, status.Errorf(codes.FailedPrecondition, "delete backing image %s: the file is in use by %v", req.Name, users)
		}
	}
	s.mu.Lock()
	f, ok := s.files[req.Name]
	if ok && f.info.Uuid == req.Uuid {
		if f.sending > 0 {
			s.mu.Unlock()
			return nil, status.Errorf(codes.FailedPrecondition, "delete backing image %s: the file is being sent to %d managers", req.Name, f.sending)
		}
		if f.cancel != nil {
			f.cancel()
		}
		done := f.done
		delete(s.files, req.Name)
		s.notifyLocked()
		s.mu.Unlock()
		if done != nil {
			<-done
		}
	} else {
		s.mu.Unlock()
	}
	if err := os.RemoveAll(backingimage.FileFolder(s.cfg.DiskPath, req.Name, req.Uuid)); err != nil {
		return nil, status.Errorf(codes.Internal, "delete backing image %s: %v", req.Name, err)
	}
	log.Info("Deleted a backing image file")
	return &pb.Empty{}, nil
}

// Watch sends a notice at once, then after every change.
func (s *Server) Watch(_ *pb.Empty, stream grpc.ServerStreamingServer[pb.Empty]) error {
	ch := make(chan struct{}, 1)
	ch <- struct{}{}
	s.mu.Lock()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case <-ch:
			if err := stream.Send(&pb.Empty{}); err != nil {
				return err
			}
		}
	}
}

// start registers a fetch or sync of a file and runs work for it in the
// background. A request for a file already ready or under way answers its
// state; a failed or unknown file is tried again; a file of the same name
// with another UUID must be deleted first.
func (s *Server) start(name, uuid, checksum string, work func(ctx context.Context, log logrus.FieldLogger) error) (*pb.FileInfo, error) {
	if err := backingimage.ValidateFile(name, uuid, checksum); err != nil {
		return nil, invalid(err)
	}
	if err := s.checkDisk(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, status.Error(codes.Unavailable, "the manager is shutting down")
	}
	f, ok := s.files[name]
	if ok && f.info.Uuid != uuid {
		return nil, status.Errorf(codes.FailedPrecondition, "backing image %s: the disk holds its file of uuid %s; delete it before getting uuid %s", name, f.info.Uuid, uuid)
	}
	if ok {
		switch longhorn.BackingImageState(f.info.State) {
		case longhorn.BackingImageStateReady, longhorn.BackingImageStateStarting, longhorn.BackingImageStateInProgress:
			if checksum != "" && f.info.CurrentChecksum != "" && f.info.CurrentChecksum != checksum {
				return nil, status.Errorf(codes.FailedPrecondition, "backing image %s: the file on the disk hashes to %s, want %s", name, f.info.CurrentChecksum, checksum)
			}
			return clone(f.info), nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f = &file{
		info:   &pb.FileInfo{Name: name, Uuid: uuid, ExpectedChecksum: checksum, State: string(longhorn.BackingImageStateStarting)},
		cancel: cancel, done: make(chan struct{}),
	}
	s.files[name] = f
	s.notifyLocked()
	log := s.log.WithFields(logrus.Fields{"backingImage": name, "uuid": uuid})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(f.done)
		defer cancel()
		// A panic in the work fails this file only, not the disk's others.
		err := func() (err error) {
			defer panics.Recover(log, &err)
			return work(ctx, log)
		}()
		if err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("stopped: %w", err)
			}
			log.WithError(err).Error("Backing image file failed")
			s.update(name, uuid, func(i *pb.FileInfo) {
				i.State, i.Message = string(longhorn.BackingImageStateFailed), err.Error()
			})
		}
	}()
	return clone(f.info), nil
}
