package instance

// The replicas this process serves to engines that are not its own (an
// engine on another node, or in another instance manager of this node),
// over the replica protocol (engine/replicaproto; docs/design-data-plane.md,
// "Replicas on other nodes"). A served replica is open here, with its
// folder's lock held, for as long as it is served: no engine of this
// process opens it meanwhile (its open meets the lock), and an engine
// elsewhere reaches it only through this process, where its term decides.

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
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
