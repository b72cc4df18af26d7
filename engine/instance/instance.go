// Package instance runs the engines of the volumes attached to this node:
// it opens their replicas, serves each engine over gRPC and, unless the
// frontend is disabled, its data over NBD on the node's address.
package instance

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
)

// ReplicaDir names a replica and the folder that holds its data.
type ReplicaDir struct {
	Name string
	Dir  string
	// Backing, when set, is the backing image file at the bottom of the
	// replica's chain; a replica created without one never gains one.
	Backing *replica.BackingFile
	// New marks a replica whose data was never created: only such a
	// replica is created when its folder holds none. Any other replica
	// is opened, and a missing folder or metadata is an error: an engine
	// never serves an empty disk in place of data it cannot find.
	New bool
	// Failed marks a replica that failed: it is not opened, but its epoch
	// is read, so that no replica whose data is behind it is RW.
	Failed bool
}

// MissingDataError is Start's error for a replica, not marked New, whose
// data is not in its folder.
type MissingDataError struct {
	Replica, Dir string
	Err          error
}

func (e *MissingDataError) Error() string {
	if os.IsNotExist(e.Err) {
		return fmt.Sprintf("the data of replica %s is missing: %s has no volume.meta; a replica that held data is never created again, empty", e.Replica, e.Dir)
	}
	return fmt.Sprintf("the data of replica %s cannot be read in %s: %v", e.Replica, e.Dir, e.Err)
}

func (e *MissingDataError) Unwrap() error { return e.Err }

// Running describes a started engine.
type Running struct {
	Engine *volumeengine.Engine
	// ID names this very engine: one started again for the volume has
	// another.
	ID string
	// Endpoint is the NBD URI of the frontend; empty without one.
	Endpoint string
}

type running struct {
	Running
	nbd *nbd.Server
}

// Engines starts and stops the engines of this node's volumes: what
// Longhorn's instance manager does, in process.
type Engines struct {
	mu        sync.Mutex
	rpc       *rpc.Server
	frontends string
	clock     clock.Clock
	log       *logrus.Entry
	engines   map[string]*running
	onChange  []func(volume string)
	onCall    func(call string)
	onStart   []func(volume string)
	onStop    []func(volume, id string)
}

// NewEngines returns the node's engines, which the rpc server serves and
// whose frontends listen on host (127.0.0.1 or the node's address).
// onChange is called when an engine's snapshots or replicas change;
// onCall, when not nil, at each call of an engine's control API.
func NewEngines(server *rpc.Server, host string, clk clock.Clock, log *logrus.Entry, onChange func(volume string), onCall func(call string)) *Engines {
	return &Engines{rpc: server, frontends: host, clock: clk, log: log, engines: map[string]*running{}, onChange: []func(string){onChange}, onCall: onCall}
}

// OnChange registers f to be called, besides the onChange given to
// NewEngines, after each change of an engine's snapshots or replicas.
// Register before the first Start.
func (m *Engines) OnChange(f func(volume string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onChange = append(m.onChange, f)
}

// OnStart registers f to be called, outside the engines' lock, each time
// an engine starts (not when Start finds it running). Register before the
// first Start.
func (m *Engines) OnStart(f func(volume string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onStart = append(m.onStart, f)
}

// OnStop registers f to be called, outside the engines' lock, each time
// an engine stops, with the ID it had. Register before the first Start.
func (m *Engines) OnStop(f func(volume, id string)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onStop = append(m.onStop, f)
}

// List returns the running engines, by volume.
func (m *Engines) List() map[string]Running {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Running, len(m.engines))
	for v, r := range m.engines {
		out[v] = r.Running
	}
	return out
}

// Get returns the running engine of a volume.
func (m *Engines) Get(volume string) (Running, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.engines[volume]
	if !ok {
		return Running{}, false
	}
	return r.Running, true
}

// Start opens the volume's replicas (creating only those marked New), starts its engine and,
// with frontend set, serves it over NBD. Starting a running engine
// returns it as it is, except that a frontend asked for on an engine
// without one is started (a workload taking over a volume a recurring job
// attached without a frontend); a frontend is never taken away from a
// running engine, whose user may be reading through it.
func (m *Engines) Start(volume string, size int64, replicas []ReplicaDir, frontend bool, opts ...StartOption) (Running, error) {
	run, started, err := m.start(volume, size, replicas, frontend, ReadStartOptions(opts))
	if started {
		m.mu.Lock()
		onStart := m.onStart
		m.mu.Unlock()
		for _, f := range onStart {
			f(volume)
		}
	}
	return run, err
}

func (m *Engines) start(volume string, size int64, replicas []ReplicaDir, frontend bool, o StartOptions) (run Running, started bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.engines[volume]; ok {
		if frontend && r.nbd == nil {
			if err := m.startFrontend(volume, r, o.FrontendPort); err != nil {
				return r.Running, false, err
			}
			m.log.WithFields(logrus.Fields{"volume": volume, "endpoint": r.Endpoint}).Info("Started the frontend of a running engine")
		}
		return r.Running, false, nil
	}
	opened := map[string]*replica.Replica{}
	closeAll := func() {
		for _, r := range opened {
			r.Close()
		}
	}
	var created []string
	var opts []volumeengine.Option
	for _, rd := range replicas {
		if rd.Failed {
			epoch, err := replica.ReadEpoch(rd.Dir)
			if err != nil {
				m.log.WithError(err).WithFields(logrus.Fields{"volume": volume, "replica": rd.Name}).Warn("Cannot read the epoch of a failed replica: the others are not compared with it")
				continue
			}
			opts = append(opts, volumeengine.KeptOut(rd.Name, epoch))
			continue
		}
		r, fresh, err := openOrCreate(rd, size)
		if err != nil {
			closeAll()
			return Running{}, false, fmt.Errorf("volume %s: replica %s: %w", volume, rd.Name, err)
		}
		opened[rd.Name] = r
		if fresh {
			created = append(created, rd.Name)
		}
	}
	// A replica created empty beside replicas that hold data (not New:
	// recorded as holding data) is behind them until it is rebuilt: never
	// RW.
	// So is a remote one marked new.
	if slices.ContainsFunc(replicas, func(rd ReplicaDir) bool { return !rd.New }) || slices.ContainsFunc(o.Remotes, func(rr RemoteReplica) bool { return !rr.New }) {
		for _, n := range created {
			opts = append(opts, volumeengine.Behind(n, "it was created empty beside replicas that hold the volume's data, and is not rebuilt from them"))
		}
		for _, rr := range o.Remotes {
			if rr.New {
				opts = append(opts, volumeengine.Behind(rr.Name, "it is marked new (created empty) beside replicas that hold the volume's data, and is not rebuilt from them"))
			}
		}
	}
	id := uuid.NewString()
	if o.Term > 0 {
		opts = append(opts, volumeengine.Term(o.VolumeUID, id, o.Term))
	} else if len(o.Remotes) > 0 {
		closeAll()
		return Running{}, false, fmt.Errorf("volume %s: remote replicas are opened with a term, and the start gives none", volume)
	}
	for _, rr := range o.Remotes {
		opts = append(opts, volumeengine.Remote(rr.Name, rr.Address))
	}
	if o.ReplicaTLS != nil {
		opts = append(opts, volumeengine.ReplicaTLS(o.ReplicaTLS))
	}
	e, err := volumeengine.New(volume, opened, m.clock, m.log, opts...)
	if err != nil {
		closeAll()
		return Running{}, false, err
	}
	// A volume grown while detached grows as its engine starts.
	if size > e.Size() {
		from := e.Size()
		if err := e.Expand(size); err != nil {
			e.Close()
			return Running{}, false, fmt.Errorf("volume %s: grow from %d to %d bytes: %w", volume, from, size, err)
		}
		m.log.WithFields(logrus.Fields{"volume": volume, "from": from, "to": size}).Info("Grew the volume as its engine started: it was expanded while detached")
	}
	onChange := m.onChange
	e.OnChange(func() {
		for _, f := range onChange {
			f(volume)
		}
	})
	if m.onCall != nil {
		e.OnCall(m.onCall)
	}
	r := &running{Running: Running{Engine: e, ID: id}}
	if frontend {
		if err := m.startFrontend(volume, r, o.FrontendPort); err != nil {
			e.Close()
			return Running{}, false, err
		}
	}
	m.rpc.Register(e)
	m.engines[volume] = r
	m.log.WithFields(logrus.Fields{"volume": volume, "id": r.ID, "replicas": len(replicas), "remoteReplicas": len(o.Remotes), "term": o.Term, "endpoint": r.Endpoint}).Info("Started engine")
	return r.Running, true, nil
}

// StartOption changes how Start starts an engine.
type StartOption func(*StartOptions)

// StartOptions is what the StartOptions given say; ReadStartOptions reads
// them, for an Instances that passes them on to another process.
type StartOptions struct {
	FrontendPort int
	VolumeUID    string
	Term         uint64
	Remotes      []RemoteReplica
	ReplicaTLS   *tls.Config
}

// ReadStartOptions is what opts say.
func ReadStartOptions(opts []StartOption) StartOptions {
	var o StartOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// RemoteReplica is a replica another process serves (Served), at
// Address, the host:port of its replica protocol. New: as ReplicaDir's.
type RemoteReplica struct {
	Name, Address string
	New           bool
}

// WithTerm makes the engine the owner of its replicas with term, as an
// engine of the volume of UID volumeUID (volumeengine.Term, with the
// engine's ID as its instance). Remote replicas need it.
func WithTerm(volumeUID string, term uint64) StartOption {
	return func(o *StartOptions) { o.VolumeUID, o.Term = volumeUID, term }
}

// WithRemoteReplicas adds replicas another process serves to those the
// engine starts over.
func WithRemoteReplicas(remotes ...RemoteReplica) StartOption {
	return func(o *StartOptions) { o.Remotes = append(o.Remotes, remotes...) }
}

// WithReplicaTLS is the client configuration remote replicas are reached
// with (the node's mutual-TLS identity's).
func WithReplicaTLS(config *tls.Config) StartOption {
	return func(o *StartOptions) { o.ReplicaTLS = config }
}

// FrontendPort asks for the frontend on port, the one the volume's engine
// had before (an instance manager started again): its clients find it
// where they were connected. Another port is taken when that one is in
// use.
func FrontendPort(port int) StartOption { return func(o *StartOptions) { o.FrontendPort = port } }

// startFrontend serves the running engine over NBD, on port if it is
// given and free.
func (m *Engines) startFrontend(volume string, run *running, port int) error {
	var l net.Listener
	var err error
	if port > 0 {
		if l, err = net.Listen("tcp", net.JoinHostPort(m.frontends, strconv.Itoa(port))); err != nil {
			m.log.WithError(err).WithFields(logrus.Fields{"volume": volume, "port": port}).Warn("The frontend's port of before is taken; serving on another")
		}
	}
	if l == nil {
		if l, err = net.Listen("tcp", net.JoinHostPort(m.frontends, "0")); err != nil {
			return fmt.Errorf("volume %s: frontend listener: %w", volume, err)
		}
	}
	run.nbd = nbd.NewServer(volume, run.Engine, m.log)
	go run.nbd.Serve(l)
	run.Endpoint = "nbd://" + l.Addr().String() + "/" + volume
	run.Engine.SetFrontend(true)
	return nil
}

// Stop ends the volume's frontend and engine and closes its replicas.
func (m *Engines) Stop(volume string) error {
	id, err := m.stop(volume)
	if id != "" {
		m.mu.Lock()
		onStop := m.onStop
		m.mu.Unlock()
		for _, f := range onStop {
			f(volume, id)
		}
	}
	return err
}

func (m *Engines) stop(volume string) (id string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.engines[volume]
	if !ok {
		return "", nil
	}
	delete(m.engines, volume)
	m.rpc.Unregister(volume)
	if r.nbd != nil {
		r.nbd.Close()
	}
	err = r.Engine.Sync()
	r.Engine.Close()
	m.log.WithFields(logrus.Fields{"volume": volume, "id": r.ID}).Info("Stopped engine")
	if errors.Is(err, volumeengine.ErrNoHealthyReplica) {
		return r.ID, nil
	}
	return r.ID, err
}

// StopEngine stops the volume's engine if it is still e, and not one
// started since in its place.
func (m *Engines) StopEngine(volume string, e *volumeengine.Engine) error {
	m.mu.Lock()
	r, ok := m.engines[volume]
	m.mu.Unlock()
	if !ok || r.Engine != e {
		return nil
	}
	return m.Stop(volume)
}

// StopID stops the volume's engine if it is the one of that ID.
func (m *Engines) StopID(volume, id string) error {
	m.mu.Lock()
	r, ok := m.engines[volume]
	m.mu.Unlock()
	if !ok || r.ID != id {
		return nil
	}
	return m.StopEngine(volume, r.Engine)
}

// StopAll stops every engine, as the daemon does when it stops.
func (m *Engines) StopAll() {
	m.mu.Lock()
	volumes := make([]string, 0, len(m.engines))
	for v := range m.engines {
		volumes = append(volumes, v)
	}
	m.mu.Unlock()
	for _, v := range volumes {
		_ = m.Stop(v)
	}
}

// openOrCreate opens the replica in rd.Dir. It creates one there only for
// a replica marked New whose folder holds none (and says so); any other
// replica whose metadata is missing is an error naming the folder.
func openOrCreate(rd ReplicaDir, size int64) (r *replica.Replica, created bool, err error) {
	if _, err := os.Stat(filepath.Join(rd.Dir, "volume.meta")); err != nil {
		if !rd.New {
			return nil, false, &MissingDataError{Replica: rd.Name, Dir: rd.Dir, Err: err}
		}
		if rd.Backing != nil {
			r, err = replica.CreateOnBacking(rd.Dir, size, *rd.Backing)
		} else {
			r, err = replica.Create(rd.Dir, size)
		}
		return r, err == nil, err
	}
	r, err = replica.Open(rd.Dir)
	if err != nil {
		return nil, false, err
	}
	if err := sameBacking(r.Backing(), rd.Backing); err != nil {
		r.Close()
		return nil, false, err
	}
	return r, false, nil
}

// sameBacking checks that an existing replica sits on the backing image
// it is asked to: its data means nothing on top of another one.
func sameBacking(have, want *replica.BackingFile) error {
	switch {
	case have == nil && want == nil:
		return nil
	case have == nil:
		return fmt.Errorf("the replica was created without a backing image, not on %s", want.Name)
	case want == nil:
		return fmt.Errorf("the replica was created on backing image %s, and the volume has none", have.Name)
	case have.Name != want.Name || have.Path != want.Path:
		return fmt.Errorf("the replica was created on backing image %s (%s), not %s (%s)", have.Name, have.Path, want.Name, want.Path)
	case want.Checksum != "" && have.Checksum != want.Checksum:
		return fmt.Errorf("the replica was created on backing image %s with checksum %s, which now has %s", have.Name, have.Checksum, want.Checksum)
	}
	return nil
}
