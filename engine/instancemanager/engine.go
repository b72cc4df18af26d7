package instancemanager

import (
	"context"
	"errors"
	"sync"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// remoteEngine is an engine of the instance manager: one engine instance
// (an engine started again for the volume is another remoteEngine).
type remoteEngine struct {
	c   *Client
	ref *pb.EngineRef

	mu  sync.Mutex
	in  *pb.Instance // as last heard of, from the watch or a call
	gen uint64
	// status is the last Status read and the generation it was read at;
	// stale marks it as one a call of the manager's own may have changed.
	status    *pb.EngineStatus
	statusGen uint64
	stale     bool
	// finished is the most backups the engine was heard to have ended.
	finished uint64
}

func newRemoteEngine(c *Client, in *pb.Instance) *remoteEngine {
	return &remoteEngine{c: c, ref: &pb.EngineRef{Volume: in.Volume, Id: in.Id}, in: in}
}

// observe records what the instance manager said of the engine.
func (e *remoteEngine) observe(in *pb.Instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.in = in
	e.gen = max(e.gen, in.Generation)
	e.finished = max(e.finished, in.BackupsFinished)
}

func (e *remoteEngine) endpoint() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.in.Endpoint
}

func (e *remoteEngine) Name() string { return e.ref.Volume }

func (e *remoteEngine) Size() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.in.Size
}

// BackupsFinished is how many backups the instance manager said the
// engine has ended, in its watch's events or its last Status; not a call.
func (e *remoteEngine) BackupsFinished() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finished
}

func (e *remoteEngine) Generation() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen
}

// changed is called after a call that may change what Status reports:
// the next Status reads the engine again, without waiting for the watch
// to report the change.
func (e *remoteEngine) changed() {
	e.mu.Lock()
	e.stale = true
	e.mu.Unlock()
}

// read returns the engine's status, read again unless the one read last
// is of the current generation. When the engine cannot be read, it
// returns the last one read (nil if none) and the error.
func (e *remoteEngine) read() (*pb.EngineStatus, error) {
	e.mu.Lock()
	if e.status != nil && !e.stale && e.statusGen == e.gen {
		st := e.status
		e.mu.Unlock()
		return st, nil
	}
	last := e.status
	e.mu.Unlock()
	e.c.called("Status")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	st, err := e.c.im.Status(ctx, e.ref)
	if err != nil {
		return last, fromStatus(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status, e.statusGen, e.stale = st, st.Instance.Generation, false
	e.in, e.gen = st.Instance, max(e.gen, st.Instance.Generation)
	e.finished = max(e.finished, st.Instance.BackupsFinished)
	return st, nil
}

func (e *remoteEngine) Status() volumeengine.Status {
	st, err := e.read()
	out := statusFromPB(st)
	if err != nil {
		// What the engine said last, with why it is not read now: the
		// mirror keeps the last snapshot list and shows the error.
		out.Snapshots, out.SnapshotsError = nil, err
	}
	return out
}

func (e *remoteEngine) ReplicaFailures() map[string]volumeengine.Failure {
	st, _ := e.read()
	out := map[string]volumeengine.Failure{}
	if st != nil {
		for name, f := range st.Failures {
			out[name] = volumeengine.Failure{Behind: f.Behind, Why: f.Why}
		}
	}
	return out
}

func (e *remoteEngine) RestoreStatus() volumeengine.RestoreStatus {
	st, _ := e.read()
	if st == nil || st.Restore == nil {
		return volumeengine.RestoreStatus{}
	}
	r := st.Restore
	return volumeengine.RestoreStatus{IsRestoring: r.Active, Progress: int(r.Progress), State: r.State, Error: r.Error,
		LastRestored: st.RestoreLastRestored, BackupURL: st.RestoreBackupUrl}
}

func (e *remoteEngine) CloneStatus() volumeengine.CloneStatus {
	st, _ := e.read()
	if st == nil || st.Clone == nil {
		return volumeengine.CloneStatus{}
	}
	c := st.Clone
	return volumeengine.CloneStatus{IsCloning: c.Active, Progress: int(c.Progress), State: c.State, Error: c.Error, Source: st.CloneSource}
}

func (e *remoteEngine) WasPurged(name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := e.c.im.WasPurged(ctx, &pb.SnapshotRef{Engine: e.ref, Name: name})
	if err != nil {
		e.c.log.WithError(fromStatus(err)).WithField("volume", e.ref.Volume).Warn("Cannot ask the engine whether it purged a snapshot")
		return false
	}
	return res.Purged
}

func (e *remoteEngine) CreateSnapshot(name string, labels map[string]string) (string, error) {
	e.c.called("CreateSnapshot")
	defer e.changed()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	res, err := e.c.im.SnapshotCreate(ctx, &pb.SnapshotCreateRequest{Engine: e.ref, Name: name, Labels: labels})
	if err != nil {
		return "", fromStatus(err)
	}
	return res.Name, nil
}

func (e *remoteEngine) DeleteSnapshot(name string) error {
	e.c.called("DeleteSnapshot")
	defer e.changed()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := e.c.im.SnapshotDelete(ctx, &pb.SnapshotRef{Engine: e.ref, Name: name})
	return fromStatus(err)
}

func (e *remoteEngine) Snapshot(name string) (replica.Snapshot, error) {
	e.c.called("Snapshot")
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	s, err := e.c.im.SnapshotGet(ctx, &pb.SnapshotRef{Engine: e.ref, Name: name})
	if err != nil {
		return replica.Snapshot{}, fromStatus(err)
	}
	return snapshotFromPB(s), nil
}

func (e *remoteEngine) StartPurge() {
	e.c.called("StartPurge")
	defer e.changed()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if _, err := e.c.im.Purge(ctx, e.ref); err != nil {
		e.c.log.WithError(fromStatus(err)).WithField("volume", e.ref.Volume).Warn("Cannot start the purge of the volume's removed snapshots")
	}
}

func (e *remoteEngine) Expand(size int64) error {
	e.c.called("Expand")
	defer e.changed()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := e.c.im.Expand(ctx, &pb.ExpandRequest{Engine: e.ref, Size: size}); err != nil {
		return fromStatus(err)
	}
	e.mu.Lock()
	e.in.Size = max(e.in.Size, size)
	e.mu.Unlock()
	return nil
}

func (e *remoteEngine) RestoreFrom(ctx context.Context, backupURL string, cred map[string]string) error {
	e.c.called("Restore")
	defer e.changed()
	_, err := e.c.im.Restore(ctx, &pb.RestoreRequest{Engine: e.ref, BackupUrl: backupURL, Credential: cred})
	return fromStatus(err)
}

func (e *remoteEngine) CloneFrom(ctx context.Context, source instance.Engine, snapshot, dataSource string) error {
	src, ok := source.(*remoteEngine)
	if !ok || src.c != e.c {
		return errors.New("clone of volume " + e.ref.Volume + ": the source's engine (" + source.Name() + ") does not run in this instance manager")
	}
	e.c.called("Clone")
	defer e.changed()
	_, err := e.c.im.Clone(ctx, &pb.CloneRequest{Engine: e.ref, Source: src.ref, Snapshot: snapshot, DataSource: dataSource})
	return fromStatus(err)
}

func statusFromPB(st *pb.EngineStatus) volumeengine.Status {
	var out volumeengine.Status
	if st == nil {
		return out
	}
	out.ReplicaModes = map[string]volumeengine.Mode{}
	for name, m := range st.ReplicaModes {
		out.ReplicaModes[name] = volumeengine.Mode(m)
	}
	if st.SnapshotsError != "" {
		out.SnapshotsError = errors.New(st.SnapshotsError)
	}
	for _, s := range st.Snapshots {
		out.Snapshots = append(out.Snapshots, snapshotFromPB(s))
	}
	if p := st.Purge; p != nil {
		out.Purge = volumeengine.PurgeStatus{IsPurging: p.Active, Progress: int(p.Progress), State: p.State, Error: p.Error}
	}
	out.Backups = map[string]volumeengine.BackupStatus{}
	for name, b := range st.Backups {
		out.Backups[name] = volumeengine.BackupStatus{Snapshot: b.Snapshot, Progress: int(b.Progress), State: b.State, URL: b.Url, Error: b.Error}
	}
	out.Rebuilds = rebuildsFromPB(st.Rebuilds)
	return out
}

func snapshotFromPB(s *pb.Snapshot) replica.Snapshot {
	return replica.Snapshot{Name: s.Name, ID: s.Id, Parent: s.Parent, Children: s.Children, Removed: s.Removed,
		UserCreated: s.UserCreated, Created: s.Created, Size: s.Size, Labels: s.Labels}
}

// StartRebuild asks the instance manager to rebuild r into the engine; an
// instance manager that does not know the call answers ErrUnimplemented.
func (e *remoteEngine) StartRebuild(r instance.RebuildReplica, from string) error {
	e.c.called("Rebuild")
	defer e.changed()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	_, err := e.c.im.Rebuild(ctx, &pb.RebuildRequest{Engine: e.ref, Replica: r.Name, Dir: r.Dir, Address: r.Address, From: from})
	return fromStatus(err)
}

func rebuildsFromPB(in map[string]*pb.RebuildStatus) map[string]volumeengine.RebuildStatus {
	out := make(map[string]volumeengine.RebuildStatus, len(in))
	for name, r := range in {
		out[name] = volumeengine.RebuildStatus{IsRebuilding: r.IsRebuilding, Progress: int(r.Progress), State: r.State, Error: r.Error,
			FromReplica: r.FromReplica, FromReplicaAddress: r.FromReplicaAddress}
	}
	return out
}
