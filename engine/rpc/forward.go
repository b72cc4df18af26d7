package rpc

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
)

// Forwarder serves the engine service of a node whose engines run in its
// instance manager: the manager's listener, with its mutual TLS and role
// guard, checks each call as Server does (the backup targets, the
// restores) and passes it to the instance manager's engine service, which
// only the node's manager reaches. A filesystem is trimmed here, where
// the node's mounts are seen.
type Forwarder struct {
	pb.UnimplementedEngineServer
	route   func(volume string) pb.EngineClient
	policy  Policy
	trimmer fstrim.Trimmer
	freezer Freezer
}

// NewForwarder forwards each call, after checking policy, to the engine
// service route gives for its volume: that of the instance manager
// running the volume's engine (a node has two while an upgrade rolls).
func NewForwarder(route func(volume string) pb.EngineClient, policy Policy, trimmer fstrim.Trimmer) *Forwarder {
	return &Forwarder{route: route, policy: policy, trimmer: trimmer}
}

// GRPCServer returns a gRPC server with the forwarding engine service on
// it, guarded as Server's.
func (f *Forwarder) GRPCServer(opts ...grpc.ServerOption) *grpc.Server { return newGRPCServer(f, opts) }

func (f *Forwarder) VolumeGet(ctx context.Context, req *pb.VolumeRequest) (*pb.Volume, error) {
	return f.route(req.Volume).VolumeGet(ctx, req)
}

// SetFreezer says how this node freezes a volume's filesystem for its
// snapshots: here, where the node's mounts are seen.
func (f *Forwarder) SetFreezer(fr Freezer) { f.freezer = fr }

func (f *Forwarder) SnapshotCreate(ctx context.Context, req *pb.SnapshotCreateRequest) (*pb.SnapshotCreateResponse, error) {
	var res *pb.SnapshotCreateResponse
	err := frozen(ctx, f.freezer, req.Volume, func() error {
		var err error
		res, err = f.route(req.Volume).SnapshotCreate(ctx, req)
		return err
	})
	return res, err
}

func (f *Forwarder) SnapshotList(ctx context.Context, req *pb.VolumeRequest) (*pb.SnapshotListResponse, error) {
	return f.route(req.Volume).SnapshotList(ctx, req)
}

func (f *Forwarder) SnapshotGet(ctx context.Context, req *pb.SnapshotRequest) (*pb.Snapshot, error) {
	return f.route(req.Volume).SnapshotGet(ctx, req)
}

func (f *Forwarder) SnapshotDelete(ctx context.Context, req *pb.SnapshotRequest) (*pb.Empty, error) {
	return f.route(req.Volume).SnapshotDelete(ctx, req)
}

func (f *Forwarder) SnapshotRevert(ctx context.Context, req *pb.SnapshotRequest) (*pb.Empty, error) {
	return f.route(req.Volume).SnapshotRevert(ctx, req)
}

func (f *Forwarder) SnapshotPurge(ctx context.Context, req *pb.VolumeRequest) (*pb.Empty, error) {
	return f.route(req.Volume).SnapshotPurge(ctx, req)
}

func (f *Forwarder) SnapshotPurgeStatus(ctx context.Context, req *pb.VolumeRequest) (*pb.PurgeStatus, error) {
	return f.route(req.Volume).SnapshotPurgeStatus(ctx, req)
}

func (f *Forwarder) BackupStatus(ctx context.Context, req *pb.VolumeRequest) (*pb.BackupStatusResponse, error) {
	return f.route(req.Volume).BackupStatus(ctx, req)
}

func (f *Forwarder) RestoreStatus(ctx context.Context, req *pb.VolumeRequest) (*pb.RestoreStatusResponse, error) {
	return f.route(req.Volume).RestoreStatus(ctx, req)
}

// BackupCreate goes on only to a configured target, with its credential
// (never the caller's).
func (f *Forwarder) BackupCreate(ctx context.Context, req *pb.BackupCreateRequest) (*pb.BackupCreateResponse, error) {
	if err := checkLabels(req.Labels); err != nil {
		return nil, err
	}
	cred, err := f.policy.checkTarget(ctx, req.Target, req.Credential)
	if err != nil {
		return nil, err
	}
	fwd := proto.Clone(req).(*pb.BackupCreateRequest)
	fwd.Credential = cred
	return f.route(fwd.Volume).BackupCreate(ctx, fwd)
}

// Restore goes on only from a configured target into a volume being
// restored from that very backup.
func (f *Forwarder) Restore(ctx context.Context, req *pb.RestoreRequest) (*pb.Empty, error) {
	target, _, _, err := backupstore.ParseURL(req.BackupUrl)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cred, err := f.policy.checkTarget(ctx, target, req.Credential)
	if err != nil {
		return nil, err
	}
	if err := f.policy.checkRestore(ctx, req.Volume, req.BackupUrl); err != nil {
		return nil, err
	}
	fwd := proto.Clone(req).(*pb.RestoreRequest)
	fwd.Credential = cred
	return f.route(fwd.Volume).Restore(ctx, fwd)
}

// SnapshotRead passes the stream on, message by message.
func (f *Forwarder) SnapshotRead(req *pb.SnapshotReadRequest, stream pb.Engine_SnapshotReadServer) error {
	from, err := f.route(req.Volume).SnapshotRead(stream.Context(), req)
	if err != nil {
		return err
	}
	for {
		chunk, err := from.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(chunk); err != nil {
			return err
		}
	}
}

// FilesystemTrim trims the filesystem mounted from a volume whose engine
// runs in the instance manager.
func (f *Forwarder) FilesystemTrim(ctx context.Context, req *pb.VolumeRequest) (*pb.FilesystemTrimResponse, error) {
	if _, err := f.route(req.Volume).VolumeGet(ctx, req); err != nil {
		return nil, err
	}
	return trim(ctx, f.trimmer, req.Volume)
}
