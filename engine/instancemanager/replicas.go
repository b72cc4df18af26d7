package instancemanager

// The replicas an instance manager serves to engines elsewhere over the
// replica protocol (ServeReplica; docs/design-data-plane.md, "Replicas on
// other nodes"), and the remote replicas of the engines it starts.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// serveReplicas serves server's replicas at cfg.ReplicaAddress, with the
// mutual-TLS leaf of cfg.TLSDir (which its engines also reach remote
// replicas with); without an address it serves none. The returned func
// stops it and closes every served replica. Without a TLS folder it
// serves on a loopback address only (tests): a replica's data and its
// term's fence never cross a network in the clear.
func serveReplicas(server *Server, cfg Config, log *logrus.Entry) (stop func(), err error) {
	if cfg.ReplicaAddress != "" && cfg.TLSDir == "" && !isLoopback(cfg.ReplicaAddress) {
		return nil, fmt.Errorf("--replica-address %s: the replica protocol is served over mutual TLS only (--tls-dir), or in the clear on a loopback address for tests", cfg.ReplicaAddress)
	}
	var serverTLS, clientTLS *tls.Config
	if cfg.TLSDir != "" {
		id, err := mtls.LoadDir(cfg.TLSDir, log.WithField("component", "tls"))
		if err != nil {
			return nil, err
		}
		serverTLS, clientTLS = id.ServerConfig(), id.ClientConfig()
	}
	rs, err := instance.ServeReplicas(cfg.ReplicaAddress, serverTLS, log.WithField("component", "replica-server"))
	if err != nil {
		return nil, err
	}
	server.replicas, server.replicaTLS = rs, clientTLS
	return rs.Close, nil
}

// isLoopback says whether address (host:port) is on a loopback IP or
// localhost.
func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) ServeReplica(_ context.Context, req *pb.ServeReplicaRequest) (*pb.ServedReplica, error) {
	if s.replicas == nil || s.replicas.Address() == "" {
		return nil, status.Error(codes.FailedPrecondition, "this instance manager serves no replica: it was started without a replica address (--replica-address)")
	}
	r := req.GetReplica()
	if r == nil {
		return nil, status.Error(codes.InvalidArgument, "replica: the request names no replica")
	}
	rd := instance.ReplicaDir{Name: r.Name, Dir: r.Dir, New: r.New, Failed: r.Failed}
	if b := r.Backing; b != nil {
		rd.Backing = &replica.BackingFile{Path: b.Path, Name: b.Name, Checksum: b.Checksum, FileSize: b.FileSize}
	}
	sr, err := s.replicas.ServeReplica(req.Volume, req.VolumeUid, rd, req.Size)
	switch {
	case errors.Is(err, instance.ErrInvalidReplica):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, instance.ErrServedElse):
		return nil, status.Error(codes.AlreadyExists, err.Error())
	case err != nil:
		return nil, engineStatus(err)
	}
	return servedToPB(sr), nil
}

func (s *Server) StopReplica(_ context.Context, ref *pb.ReplicaRef) (*pb.Empty, error) {
	if s.replicas != nil {
		s.replicas.Stop(ref.GetName())
	}
	return &pb.Empty{}, nil
}

func (s *Server) ListReplicas(context.Context, *pb.Empty) (*pb.ServedReplicaList, error) {
	if s.replicas == nil {
		return &pb.ServedReplicaList{}, nil
	}
	list, address, _ := s.replicas.ListReplicas()
	out := &pb.ServedReplicaList{Address: address}
	for _, sr := range list {
		out.Replicas = append(out.Replicas, servedToPB(sr))
	}
	return out, nil
}

func servedToPB(sr instance.ServedReplica) *pb.ServedReplica {
	return &pb.ServedReplica{Name: sr.Name, Volume: sr.Volume, VolumeUid: sr.VolumeUID, Dir: sr.Dir, Address: sr.Address,
		Size: sr.Size, Epoch: sr.Epoch, Term: sr.Term, Engine: sr.Engine}
}

// remoteOptions are the start options of req's term and remote replicas.
func (s *Server) remoteOptions(req *pb.StartRequest) ([]instance.StartOption, error) {
	var opts []instance.StartOption
	if req.Term > 0 {
		if req.VolumeUid == "" {
			return nil, status.Error(codes.InvalidArgument, "volume_uid: a start with a term names the volume's UID")
		}
		opts = append(opts, instance.WithTerm(req.VolumeUid, req.Term))
	}
	if len(req.RemoteReplicas) == 0 {
		return opts, nil
	}
	if req.Term == 0 {
		return nil, status.Error(codes.InvalidArgument, "term: remote replicas are opened with a term above 0")
	}
	for _, rr := range req.RemoteReplicas {
		if rr.Name == "" || rr.Address == "" {
			return nil, status.Errorf(codes.InvalidArgument, "remote_replicas: each names the replica and its address (%q at %q)", rr.Name, rr.Address)
		}
		opts = append(opts, instance.WithRemoteReplicas(instance.RemoteReplica{Name: rr.Name, Address: rr.Address, New: rr.New}))
	}
	if s.replicaTLS != nil {
		opts = append(opts, instance.WithReplicaTLS(s.replicaTLS))
	}
	return opts, nil
}
