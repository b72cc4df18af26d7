package engineapi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// DefaultTimeout bounds every call that has no shorter deadline.
const DefaultTimeout = 30 * time.Second

// GRPCClient is an EngineClient over gRPC.
type GRPCClient struct {
	conn    *grpc.ClientConn
	client  pb.EngineClient
	volume  string
	address string
	timeout time.Duration
	// shared: the connection is a Conns', which Close leaves open.
	shared bool
}

// NewGRPCClient returns a client of the engine of volume served at
// address (host:port), speaking mutual TLS as id. Connections are made
// lazily.
func NewGRPCClient(address, volume string, timeout time.Duration, id *mtls.Identity) (*GRPCClient, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if id == nil {
		return nil, fmt.Errorf("engine of volume %s at %s: no internal TLS identity to call it with", volume, address)
	}
	conn, err := grpc.NewClient(address, id.GRPCDialOption())
	if err != nil {
		return nil, fmt.Errorf("engine of volume %s at %s: %w", volume, address, err)
	}
	return &GRPCClient{conn: conn, client: pb.NewEngineClient(conn), volume: volume, address: address, timeout: timeout}, nil
}

// Close closes the connection, unless it is shared (Conns).
func (c *GRPCClient) Close() error {
	if c.shared {
		return nil
	}
	return c.conn.Close()
}

func (c *GRPCClient) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, c.timeout)
}

// wrap turns a gRPC status into an engineapi error that names the volume.
func (c *GRPCClient) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	st := status.Convert(err)
	kind := ErrUnavailable
	switch st.Code() {
	case codes.NotFound:
		kind = ErrNotFound
	case codes.InvalidArgument:
		kind = ErrInvalid
	case codes.FailedPrecondition:
		kind = ErrPrecondition
	}
	return fmt.Errorf("%s on the engine of volume %s at %s: %w: %s", op, c.volume, c.address, kind, st.Message())
}

func (c *GRPCClient) VolumeGet(ctx context.Context) (*Volume, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	v, err := c.client.VolumeGet(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("volume get", err)
	}
	modes := map[string]longhorn.ReplicaMode{}
	for name, m := range v.ReplicaModes {
		modes[name] = longhorn.ReplicaMode(m)
	}
	return &Volume{Name: v.Name, Size: v.Size, ReplicaModes: modes}, nil
}

func (c *GRPCClient) SnapshotCreate(ctx context.Context, name string, labels map[string]string) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.client.SnapshotCreate(ctx, &pb.SnapshotCreateRequest{Volume: c.volume, Name: name, Labels: labels})
	if err != nil {
		return "", c.wrap("snapshot create", err)
	}
	return resp.Name, nil
}

func snapshotInfo(s *pb.Snapshot) *longhorn.SnapshotInfo {
	return NewSnapshotInfo(s.Name, s.Parent, s.Children, s.Removed, s.UserCreated, s.Created, s.Size, s.Labels)
}

// NewSnapshotInfo is an engine snapshot as Longhorn's Engine status lists
// it: the one definition of that entry, whether the snapshot was read
// from a running engine in this process or over its gRPC API.
func NewSnapshotInfo(name, parent string, children []string, removed, userCreated bool, created string, size int64, labels map[string]string) *longhorn.SnapshotInfo {
	set := make(map[string]bool, len(children))
	for _, c := range children {
		set[c] = true
	}
	return &longhorn.SnapshotInfo{
		Name: name, Parent: parent, Children: set, Removed: removed, UserCreated: userCreated,
		Created: created, Size: strconv.FormatInt(size, 10), Labels: labels,
	}
}

func (c *GRPCClient) SnapshotList(ctx context.Context) (map[string]*longhorn.SnapshotInfo, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.client.SnapshotList(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("snapshot list", err)
	}
	out := make(map[string]*longhorn.SnapshotInfo, len(resp.Snapshots))
	for _, s := range resp.Snapshots {
		out[s.Name] = snapshotInfo(s)
	}
	return out, nil
}

func (c *GRPCClient) SnapshotGet(ctx context.Context, name string) (*longhorn.SnapshotInfo, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	s, err := c.client.SnapshotGet(ctx, &pb.SnapshotRequest{Volume: c.volume, Name: name})
	if err != nil {
		return nil, c.wrap("snapshot get "+name, err)
	}
	return snapshotInfo(s), nil
}

func (c *GRPCClient) SnapshotDelete(ctx context.Context, name string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.client.SnapshotDelete(ctx, &pb.SnapshotRequest{Volume: c.volume, Name: name})
	return c.wrap("snapshot delete "+name, err)
}

func (c *GRPCClient) SnapshotRevert(ctx context.Context, name string) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.client.SnapshotRevert(ctx, &pb.SnapshotRequest{Volume: c.volume, Name: name})
	return c.wrap("snapshot revert "+name, err)
}

func (c *GRPCClient) SnapshotPurge(ctx context.Context) error {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	_, err := c.client.SnapshotPurge(ctx, &pb.VolumeRequest{Volume: c.volume})
	return c.wrap("snapshot purge", err)
}

func (c *GRPCClient) FilesystemTrim(ctx context.Context) (*FilesystemTrimResult, error) {
	ctx, cancel := context.WithTimeout(ctx, FilesystemTrimTimeout)
	defer cancel()
	res, err := c.client.FilesystemTrim(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("filesystem trim", err)
	}
	return &FilesystemTrimResult{MountPoint: res.MountPoint, TrimmedBytes: res.TrimmedBytes}, nil
}

func (c *GRPCClient) SnapshotPurgeStatus(ctx context.Context) (map[string]*longhorn.PurgeStatus, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	st, err := c.client.SnapshotPurgeStatus(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("snapshot purge status", err)
	}
	return map[string]*longhorn.PurgeStatus{c.address: {
		IsPurging: st.IsPurging, Progress: int(st.Progress), State: st.State, Error: st.Error,
	}}, nil
}

func (c *GRPCClient) SnapshotBackup(ctx context.Context, req BackupRequest) (string, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.client.BackupCreate(ctx, &pb.BackupCreateRequest{Volume: c.volume, Name: req.Name, Snapshot: req.Snapshot, Target: req.Target,
		Labels: req.Labels, Credential: req.Credential, CompressionMethod: req.Compression, ConcurrentLimit: int32(req.Concurrency), Full: req.Full})
	if err != nil {
		return "", c.wrap("backup of snapshot "+req.Snapshot, err)
	}
	return resp.Name, nil
}

func (c *GRPCClient) BackupStatus(ctx context.Context) (map[string]*longhorn.EngineBackupStatus, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	resp, err := c.client.BackupStatus(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("backup status", err)
	}
	out := make(map[string]*longhorn.EngineBackupStatus, len(resp.Backups))
	for name, st := range resp.Backups {
		out[name] = &longhorn.EngineBackupStatus{SnapshotName: st.Snapshot, Progress: int(st.Progress), State: st.State, BackupURL: st.Url, Error: st.Error}
	}
	return out, nil
}

// RestoreTimeout bounds a restore, which takes as long as its data does.
const RestoreTimeout = time.Hour

func (c *GRPCClient) BackupRestore(ctx context.Context, backupURL string, cred map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, RestoreTimeout)
	defer cancel()
	_, err := c.client.Restore(ctx, &pb.RestoreRequest{Volume: c.volume, BackupUrl: backupURL, Credential: cred})
	return c.wrap("restore of "+backupURL, err)
}

func (c *GRPCClient) RestoreStatus(ctx context.Context) (map[string]*longhorn.RestoreStatus, error) {
	ctx, cancel := c.ctx(ctx)
	defer cancel()
	st, err := c.client.RestoreStatus(ctx, &pb.VolumeRequest{Volume: c.volume})
	if err != nil {
		return nil, c.wrap("restore status", err)
	}
	return map[string]*longhorn.RestoreStatus{c.address: {
		IsRestoring: st.IsRestoring, Progress: int(st.Progress), State: st.State, Error: st.Error,
		LastRestored: st.LastRestored, BackupURL: st.BackupUrl,
	}}, nil
}

var _ EngineClient = (*GRPCClient)(nil)
