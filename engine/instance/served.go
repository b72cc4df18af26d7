package instance

// The replicas this process serves to engines that are not its own (an
// engine on another node, or in another instance manager of this node),
// over the replica protocol (engine/replicaproto; docs/design-data-plane.md,
// "Replicas on other nodes"). A served replica is open here, with its
// folder's lock held, for as long as it is served: no engine of this
// process opens it meanwhile (its open meets the lock), and an engine
// elsewhere reaches it only through this process, where its term decides.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// ErrServedElse marks a ServeReplica of a replica name that this process
// serves already as another replica: another volume (UID) or folder.
var ErrServedElse = errors.New("served already as another replica")

// ServedReplica describes a replica the process serves.
type ServedReplica struct {
	Name, Volume, VolumeUID, Dir string
	Size                         int64
	Epoch                        uint64
	// Term and Engine: the term the replica holds and the engine instance
	// that holds it ("" and 0 before any engine took it).
	Term   uint64
	Engine string
	// Address is where it is reached (host:port), as the instance
	// manager that serves it says; "" from Served itself.
	Address string
}

type servedReplica struct {
	volume, volumeUID, dir string
	r                      *replica.Replica
}

// Served is the replicas this process serves.
type Served struct {
	log *logrus.Entry

	mu       sync.Mutex
	replicas map[string]*servedReplica
	closed   bool
}

// NewServed returns a registry that serves no replica yet.
func NewServed(log *logrus.Entry) *Served {
	return &Served{log: log, replicas: map[string]*servedReplica{}}
}

// Serve opens replica rd of volume (of UID volumeUID, size bytes) to be
// served: created only when marked New and its folder holds no data, as
// an engine's start would. A replica served already is returned as it is
// when it is the same (volume UID and folder), and refused with
// ErrServedElse otherwise.
func (s *Served) Serve(volume, volumeUID string, rd ReplicaDir, size int64) (ServedReplica, error) {
	if volume == "" || volumeUID == "" || rd.Name == "" || rd.Dir == "" {
		return ServedReplica{}, fmt.Errorf("%w: a served replica names its volume, the volume's UID, itself and its folder", ErrInvalidReplica)
	}
	if rd.Failed {
		return ServedReplica{}, fmt.Errorf("%w: replica %s is marked failed, and is not served", ErrInvalidReplica, rd.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ServedReplica{}, errors.New("the replicas' server is stopping")
	}
	if have, ok := s.replicas[rd.Name]; ok {
		if have.volumeUID != volumeUID || have.dir != rd.Dir {
			return ServedReplica{}, fmt.Errorf("replica %s: %w (volume %s of UID %s, in %s)", rd.Name, ErrServedElse, have.volume, have.volumeUID, have.dir)
		}
		return describe(rd.Name, have), nil
	}
	r, created, err := openOrCreate(rd, size)
	if err != nil {
		return ServedReplica{}, fmt.Errorf("volume %s: replica %s: %w", volume, rd.Name, err)
	}
	sr := &servedReplica{volume: volume, volumeUID: volumeUID, dir: rd.Dir, r: r}
	s.replicas[rd.Name] = sr
	s.log.WithFields(logrus.Fields{"volume": volume, "replica": rd.Name, "dir": rd.Dir, "created": created}).Info("Serving replica over the replica protocol")
	return describe(rd.Name, sr), nil
}

// ErrInvalidReplica marks a ServeReplica that does not say which replica.
var ErrInvalidReplica = errors.New("invalid replica")

func describe(name string, sr *servedReplica) ServedReplica {
	term, engine := sr.r.Term()
	return ServedReplica{Name: name, Volume: sr.volume, VolumeUID: sr.volumeUID, Dir: sr.dir, Size: sr.r.Size(), Epoch: sr.r.Epoch(), Term: term, Engine: engine}
}

// Stop closes a served replica: an engine still using it sees its
// requests fail from then on. A replica not served is done already.
func (s *Served) Stop(name string) {
	s.mu.Lock()
	sr, ok := s.replicas[name]
	delete(s.replicas, name)
	s.mu.Unlock()
	if !ok {
		return
	}
	sr.r.Close()
	s.log.WithFields(logrus.Fields{"volume": sr.volume, "replica": name}).Info("Stopped serving replica")
}

// List is every served replica, by name.
func (s *Served) List() []ServedReplica {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ServedReplica, 0, len(s.replicas))
	for n, sr := range s.replicas {
		out = append(out, describe(n, sr))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds the replica an open of the replica protocol asks for: one
// served under that name, of that volume UID (a replica of a volume
// deleted and made again under its name is another).
func (s *Served) Lookup(req replicaproto.OpenRequest) (replicaproto.Replica, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr, ok := s.replicas[req.Replica]
	if !ok {
		return nil, fmt.Errorf("replica %s is not served here", req.Replica)
	}
	if sr.volumeUID != req.VolumeUID {
		return nil, fmt.Errorf("replica %s here is of volume %s of UID %s, not of UID %s", req.Replica, sr.volume, sr.volumeUID, req.VolumeUID)
	}
	return sr.r, nil
}

// CloseAll stops serving every replica, and refuses more.
func (s *Served) CloseAll() {
	s.mu.Lock()
	s.closed = true
	all := s.replicas
	s.replicas = map[string]*servedReplica{}
	s.mu.Unlock()
	for _, sr := range all {
		sr.r.Close()
	}
}

// ReplicaServer is how the manager has its node serve replicas to
// engines elsewhere: its instance manager (instancemanager.Client), or
// this process (ReplicaService) when the engines run in it.
type ReplicaServer interface {
	// ServeReplica serves replica rd of volume, as Served.Serve does, and
	// says where it is reached (Address).
	ServeReplica(volume, volumeUID string, rd ReplicaDir, size int64) (ServedReplica, error)
	// StopReplica stops serving a replica; one not served is done.
	StopReplica(name string) error
	// ListReplicas is what is served, and where ("" when nothing can be:
	// no replica address).
	ListReplicas() ([]ServedReplica, string, error)
}

// ReplicaService is Served on a listener of the replica protocol.
type ReplicaService struct {
	*Served
	address string
	stop    func()
}

var _ ReplicaServer = (*ReplicaService)(nil)

// ServeReplicas serves replicas over the replica protocol at address
// (host:port; port 0 takes a free one), with serverTLS when given: only a
// Longhorn component's leaf is answered (mtls.ComponentsOnlyTLS). An
// empty address serves nothing: every ServeReplica is refused, saying so.
func ServeReplicas(address string, serverTLS *tls.Config, log *logrus.Entry) (*ReplicaService, error) {
	served := NewServed(log)
	if address == "" {
		return &ReplicaService{Served: served, stop: served.CloseAll}, nil
	}
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("the replica protocol's listener on %s: %w", address, err)
	}
	if serverTLS != nil {
		serverTLS = mtls.ComponentsOnlyTLS(serverTLS)
	}
	rs := replicaproto.NewServer(served.Lookup, log)
	go func() { _ = rs.Serve(l, serverTLS) }()
	log.WithFields(logrus.Fields{"address": l.Addr().String(), "tls": serverTLS != nil}).Info("Serving replicas over the replica protocol")
	return &ReplicaService{Served: served, address: l.Addr().String(), stop: func() {
		_ = l.Close()
		rs.Close()
		served.CloseAll()
	}}, nil
}

// ErrNoReplicaAddress refuses a serve where nothing is served.
var ErrNoReplicaAddress = errors.New("replicas are not served here: no replica address is set (--replica-address)")

// Address is where the replicas are served; "" when nothing is.
func (s *ReplicaService) Address() string { return s.address }

func (s *ReplicaService) ServeReplica(volume, volumeUID string, rd ReplicaDir, size int64) (ServedReplica, error) {
	if s.address == "" {
		return ServedReplica{}, ErrNoReplicaAddress
	}
	sr, err := s.Serve(volume, volumeUID, rd, size)
	sr.Address = s.address
	return sr, err
}

func (s *ReplicaService) StopReplica(name string) error {
	s.Stop(name)
	return nil
}

func (s *ReplicaService) ListReplicas() ([]ServedReplica, string, error) {
	list := s.List()
	for i := range list {
		list[i].Address = s.address
	}
	return list, s.address, nil
}

// Close stops serving and closes every served replica.
func (s *ReplicaService) Close() { s.stop() }
