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
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// serveReplicas serves server's replicas at cfg.ReplicaAddress, with the
// mutual-TLS leaf of cfg.TLSDir (which its engines also reach remote
// replicas with); without an address it serves none. The returned func
// stops it and closes every served replica.
func serveReplicas(server *Server, cfg Config, log *logrus.Entry) (stop func(), err error) {
	var serverTLS, clientTLS *tls.Config
	if cfg.TLSDir != "" {
		id, err := mtls.LoadDir(cfg.TLSDir, log.WithField("component", "tls"))
		if err != nil {
			return nil, err
		}
		serverTLS, clientTLS = componentsOnly(id.ServerConfig()), id.ClientConfig()
	}
	served := instance.NewServed(log.WithField("component", "replica-server"))
	if cfg.ReplicaAddress == "" {
		server.setReplicas(served, "", clientTLS)
		return served.CloseAll, nil
	}
	l, err := net.Listen("tcp", cfg.ReplicaAddress)
	if err != nil {
		return nil, fmt.Errorf("the replica protocol's listener on %s: %w", cfg.ReplicaAddress, err)
	}
	rs := replicaproto.NewServer(served.Lookup, log.WithField("component", "replica-server"))
	go func() { _ = rs.Serve(l, serverTLS) }()
	server.setReplicas(served, l.Addr().String(), clientTLS)
	log.WithFields(logrus.Fields{"address": l.Addr().String(), "tls": serverTLS != nil}).Info("Serving replicas over the replica protocol")
	return func() {
		_ = l.Close()
		rs.Close()
		served.CloseAll()
	}, nil
}

// componentsOnly answers only a Longhorn component's leaf: a leaf of a
// narrower role (a backing image data source's, which fetches untrusted
// URLs) reaches no replica.
func componentsOnly(config *tls.Config) *tls.Config {
	verify := config.VerifyConnection
	config.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := verify(cs); err != nil {
			return err
		}
		if role := mtls.RoleOf(cs.PeerCertificates[0]); role != mtls.RoleComponent {
			return fmt.Errorf("a %s certificate may not reach replicas", role)
		}
		return nil
	}
	return config
}

// setReplicas gives the server the replicas it serves, the address it
// serves them at, and the TLS its engines reach remote replicas with.
func (s *Server) setReplicas(served *instance.Served, address string, clientTLS *tls.Config) {
	s.served, s.replicaAddress, s.replicaTLS = served, address, clientTLS
}

func (s *Server) ServeReplica(_ context.Context, req *pb.ServeReplicaRequest) (*pb.ServedReplica, error) {
	if s.replicaAddress == "" {
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
	sr, err := s.served.Serve(req.Volume, req.VolumeUid, rd, req.Size)
	switch {
	case errors.Is(err, instance.ErrInvalidReplica):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, instance.ErrServedElse):
		return nil, status.Error(codes.AlreadyExists, err.Error())
	case err != nil:
		return nil, engineStatus(err)
	}
	return s.servedToPB(sr), nil
}

func (s *Server) StopReplica(_ context.Context, ref *pb.ReplicaRef) (*pb.Empty, error) {
	if s.served != nil {
		s.served.Stop(ref.GetName())
	}
	return &pb.Empty{}, nil
}

func (s *Server) ListReplicas(context.Context, *pb.Empty) (*pb.ServedReplicaList, error) {
	out := &pb.ServedReplicaList{Address: s.replicaAddress}
	if s.served == nil {
		return out, nil
	}
	for _, sr := range s.served.List() {
		out.Replicas = append(out.Replicas, s.servedToPB(sr))
	}
	return out, nil
}

func (s *Server) servedToPB(sr instance.ServedReplica) *pb.ServedReplica {
	return &pb.ServedReplica{Name: sr.Name, Volume: sr.Volume, VolumeUid: sr.VolumeUID, Dir: sr.Dir, Address: s.replicaAddress,
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
