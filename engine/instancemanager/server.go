// Package instancemanager is the node's instance manager: the process
// that runs the engines of the volumes attached to the node, with their
// NBD exports, apart from the manager, so that the manager's restart,
// upgrade or crash interrupts no volume's I/O. Server is its side of the
// control API, Client the manager's (an instance.Instances).
package instancemanager

import (
	"context"
	"crypto/tls"
	"sync"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/grpcrecover"
)

// watchBuffer is how many events a watcher may be behind; one further
// behind is dropped (its stream ends) and, as any watcher that
// reconnects, is sent every engine again.
const watchBuffer = 1024

// Server serves the engines of one instance.Engines.
type Server struct {
	pb.UnimplementedInstanceManagerServer
	engines *instance.Engines
	log     *logrus.Entry
	// replicas, replicaTLS: replicas.go.
	replicas   *instance.ReplicaService
	replicaTLS *tls.Config

	mu       sync.Mutex
	watchers map[chan *pb.Event]struct{}
	closing  bool
}

// NewServer serves engines, which must have no engine started yet: it
// registers for their starts, changes and stops.
func NewServer(engines *instance.Engines, log *logrus.Entry) *Server {
	s := &Server{engines: engines, log: log, watchers: map[chan *pb.Event]struct{}{}}
	engines.OnStart(func(volume string) { s.sendFor(volume, pb.Event_STARTED) })
	engines.OnChange(func(volume string) { s.sendFor(volume, pb.Event_CHANGED) })
	engines.OnStop(func(volume, id string) {
		s.send(&pb.Event{Type: pb.Event_STOPPED, Instance: &pb.Instance{Volume: volume, Id: id}})
	})
	return s
}

// Register puts the service on g. A panic in a handler answers
// codes.Internal and is logged: the other engines keep being served.
func (s *Server) Register(g *grpc.Server) { pb.RegisterInstanceManagerServer(g, s) }

// ServerOptions are the gRPC server's options for the instance manager's
// services.
func ServerOptions(log *logrus.Entry) []grpc.ServerOption { return grpcrecover.ServerOptions(log) }

func (s *Server) sendFor(volume string, t pb.Event_Type) {
	run, ok := s.engines.Get(volume)
	if !ok {
		return
	}
	s.send(&pb.Event{Type: t, Instance: toInstance(volume, run)})
}

// closeWatches ends every watch once it has sent the events before, and
// refuses new ones: the instance manager is stopping.
func (s *Server) closeWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for ch := range s.watchers {
		delete(s.watchers, ch)
		close(ch)
	}
}

func (s *Server) send(ev *pb.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default:
			// Too far behind: its stream ends, and the watcher lists
			// everything again when it reconnects.
			delete(s.watchers, ch)
			close(ch)
		}
	}
}

func toInstance(volume string, run instance.Running) *pb.Instance {
	// The count of ended backups before the generation, which then is
	// at least that of the status reporting them ended.
	finished := run.Engine.BackupsFinished()
	return &pb.Instance{Volume: volume, Id: run.ID, Endpoint: run.Endpoint, Size: run.Engine.Size(), Generation: run.Engine.Generation(),
		BackupsFinished: finished}
}

func (s *Server) Watch(_ *pb.Empty, stream pb.InstanceManager_WatchServer) error {
	ch := make(chan *pb.Event, watchBuffer)
	// Subscribed before the list is read: an engine that starts meanwhile
	// is sent twice at worst, never missed.
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "the instance manager is stopping")
	}
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := s.watchers[ch]; ok {
			delete(s.watchers, ch)
			close(ch)
		}
		s.mu.Unlock()
	}()
	for volume, run := range s.engines.List() {
		if err := stream.Send(&pb.Event{Type: pb.Event_STARTED, Instance: toInstance(volume, run)}); err != nil {
			return err
		}
	}
	if err := stream.Send(&pb.Event{Type: pb.Event_SYNCED}); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev, ok := <-ch:
			if !ok {
				s.mu.Lock()
				closing := s.closing
				s.mu.Unlock()
				if closing {
					return status.Error(codes.Unavailable, "the instance manager is stopping")
				}
				return status.Error(codes.ResourceExhausted, "the watcher fell too far behind the engines' events; watch again")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

func (s *Server) Start(_ context.Context, req *pb.StartRequest) (*pb.Instance, error) {
	dirs := make([]instance.ReplicaDir, 0, len(req.Replicas))
	for _, r := range req.Replicas {
		rd := instance.ReplicaDir{Name: r.Name, Dir: r.Dir, New: r.New, Failed: r.Failed}
		if b := r.Backing; b != nil {
			rd.Backing = &replica.BackingFile{Path: b.Path, Name: b.Name, Checksum: b.Checksum, FileSize: b.FileSize}
		}
		dirs = append(dirs, rd)
	}
	opts, err := s.remoteOptions(req)
	if err != nil {
		return nil, err
	}
	if req.FrontendPort > 0 {
		opts = append(opts, instance.FrontendPort(int(req.FrontendPort)))
	}
	run, err := s.engines.Start(req.Volume, req.Size, dirs, req.Frontend, opts...)
	if err != nil {
		return nil, engineStatus(err)
	}
	return toInstance(req.Volume, run), nil
}

func (s *Server) Stop(_ context.Context, ref *pb.EngineRef) (*pb.Empty, error) {
	var err error
	if ref.Id == "" {
		err = s.engines.Stop(ref.Volume)
	} else {
		err = s.engines.StopID(ref.Volume, ref.Id)
	}
	return &pb.Empty{}, engineStatus(err)
}

func (s *Server) List(context.Context, *pb.Empty) (*pb.ListResponse, error) {
	out := &pb.ListResponse{}
	for volume, run := range s.engines.List() {
		out.Instances = append(out.Instances, toInstance(volume, run))
	}
	return out, nil
}

// engine is the running engine ref names; NotFound when none runs, or
// another one than ref's id.
func (s *Server) engine(ref *pb.EngineRef) (instance.Running, error) {
	if ref == nil {
		return instance.Running{}, status.Error(codes.InvalidArgument, "engine: the request names no engine")
	}
	run, ok := s.engines.Get(ref.Volume)
	if !ok {
		return run, status.Errorf(codes.NotFound, "volume %q has no engine in this instance manager", ref.Volume)
	}
	if ref.Id != "" && ref.Id != run.ID {
		return run, status.Errorf(codes.NotFound, "volume %q: engine %s no longer runs (engine %s runs in its place)", ref.Volume, ref.Id, run.ID)
	}
	return run, nil
}

func (s *Server) Status(_ context.Context, ref *pb.EngineRef) (*pb.EngineStatus, error) {
	run, err := s.engine(ref)
	if err != nil {
		return nil, err
	}
	// The generation is read first: a change while reading moves it, and
	// the manager reads again.
	in := toInstance(ref.Volume, run)
	return statusToPB(in, run.Engine), nil
}

func (s *Server) WasPurged(_ context.Context, req *pb.SnapshotRef) (*pb.WasPurgedResponse, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	return &pb.WasPurgedResponse{Purged: run.Engine.WasPurged(req.Name)}, nil
}

func (s *Server) SnapshotCreate(_ context.Context, req *pb.SnapshotCreateRequest) (*pb.SnapshotCreateResponse, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	name, err := run.Engine.CreateSnapshot(req.Name, req.Labels)
	if err != nil {
		return nil, engineStatus(err)
	}
	return &pb.SnapshotCreateResponse{Name: name}, nil
}

func (s *Server) SnapshotDelete(_ context.Context, req *pb.SnapshotRef) (*pb.Empty, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, engineStatus(run.Engine.DeleteSnapshot(req.Name))
}

func (s *Server) SnapshotGet(_ context.Context, req *pb.SnapshotRef) (*pb.Snapshot, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	snap, err := run.Engine.Snapshot(req.Name)
	if err != nil {
		return nil, engineStatus(err)
	}
	return snapshotToPB(snap), nil
}

func (s *Server) Purge(_ context.Context, ref *pb.EngineRef) (*pb.Empty, error) {
	run, err := s.engine(ref)
	if err != nil {
		return nil, err
	}
	run.Engine.StartPurge()
	return &pb.Empty{}, nil
}

func (s *Server) Expand(_ context.Context, req *pb.ExpandRequest) (*pb.Empty, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, engineStatus(run.Engine.Expand(req.Size))
}

// Restore trusts its caller with the target and credential: only the
// node's manager reaches this service (a socket only root opens), and it
// checks both against the cluster's backup targets first.
func (s *Server) Restore(ctx context.Context, req *pb.RestoreRequest) (*pb.Empty, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	store, volume, backup, err := instance.OpenBackup(req.BackupUrl, req.Credential)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.Empty{}, engineStatus(run.Engine.Restore(ctx, store, volume, backup))
}

func (s *Server) Clone(ctx context.Context, req *pb.CloneRequest) (*pb.Empty, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	src, err := s.engine(req.Source)
	if err != nil {
		return nil, err
	}
	return &pb.Empty{}, engineStatus(instance.CloneLocal(ctx, run.Engine, src.Engine, req.Snapshot, req.DataSource))
}

// statusToPB is what the manager mirrors of e, read in the engine's own
// calls (each counted as one of its control API).
func statusToPB(in *pb.Instance, e *volumeengine.Engine) *pb.EngineStatus {
	st := e.Status()
	out := &pb.EngineStatus{Instance: in, ReplicaModes: map[string]string{}, Backups: map[string]*pb.BackupStatus{}, Failures: map[string]*pb.Failure{}}
	for name, m := range st.ReplicaModes {
		out.ReplicaModes[name] = string(m)
	}
	if st.SnapshotsError != nil {
		out.SnapshotsError = st.SnapshotsError.Error()
	}
	for _, snap := range st.Snapshots {
		out.Snapshots = append(out.Snapshots, snapshotToPB(snap))
	}
	out.Purge = &pb.Progress{Active: st.Purge.IsPurging, Progress: int32(st.Purge.Progress), State: st.Purge.State, Error: st.Purge.Error}
	for name, b := range st.Backups {
		out.Backups[name] = &pb.BackupStatus{Snapshot: b.Snapshot, Progress: int32(b.Progress), State: b.State, Url: b.URL, Error: b.Error}
	}
	r := e.RestoreStatus()
	out.Restore = &pb.Progress{Active: r.IsRestoring, Progress: int32(r.Progress), State: r.State, Error: r.Error}
	out.RestoreLastRestored, out.RestoreBackupUrl = r.LastRestored, r.BackupURL
	c := e.CloneStatus()
	out.Clone = &pb.Progress{Active: c.IsCloning, Progress: int32(c.Progress), State: c.State, Error: c.Error}
	out.CloneSource = c.Source
	for name, f := range e.ReplicaFailures() {
		out.Failures[name] = &pb.Failure{Behind: f.Behind, Why: f.Why}
	}
	out.Rebuilds = map[string]*pb.RebuildStatus{}
	for name, r := range st.Rebuilds {
		out.Rebuilds[name] = &pb.RebuildStatus{IsRebuilding: r.IsRebuilding, Progress: int32(r.Progress), State: r.State, Error: r.Error,
			FromReplica: r.FromReplica, FromReplicaAddress: r.FromReplicaAddress}
	}
	return out
}

// Rebuild rebuilds a replica into a running engine (instance.Rebuild).
func (s *Server) Rebuild(_ context.Context, req *pb.RebuildRequest) (*pb.Empty, error) {
	run, err := s.engine(req.Engine)
	if err != nil {
		return nil, err
	}
	rr := instance.RebuildReplica{Name: req.Replica, Dir: req.Dir, Address: req.Address}
	return &pb.Empty{}, engineStatus(instance.Rebuild(run.Engine, rr, req.From))
}

func snapshotToPB(s replica.Snapshot) *pb.Snapshot {
	return &pb.Snapshot{Name: s.Name, Id: s.ID, Parent: s.Parent, Children: s.Children, Removed: s.Removed,
		UserCreated: s.UserCreated, Created: s.Created, Size: s.Size, Labels: s.Labels}
}
