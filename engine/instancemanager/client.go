package instancemanager

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
)

const (
	// callTimeout bounds a call of the control API; startTimeout a start,
	// which opens every replica (and may grow them).
	callTimeout  = 30 * time.Second
	startTimeout = 2 * time.Minute
	// rewatchDelay spaces the watches of an instance manager that is
	// gone, until it is back.
	rewatchDelay = 500 * time.Millisecond
)

// Client is the manager's side of its node's instance manager: an
// instance.Instances whose engines run there. It follows them through a
// watch, so what Get returns is what the instance manager last said it
// runs; while it cannot be reached, the engines it ran are still returned
// (they most likely run on) and every call of theirs fails with
// instance.ErrUnreachable.
type Client struct {
	conn   *grpc.ClientConn
	im     pb.InstanceManagerClient
	log    *logrus.Entry
	onCall func(call string)
	cancel context.CancelFunc
	done   chan struct{}
	revive func() error // see Dial
	// watchLost is set while the watch is broken (follow's alone).
	watchLost bool
	// connected is set while a watch has listed the engines and runs.
	connected atomic.Bool

	mu      sync.Mutex
	engines map[string]*remoteEngine
	// ports are the frontend ports the volumes' engines had, kept after
	// they are gone: an engine started again (its instance manager died)
	// serves where its clients were connected.
	ports map[string]int32
	// lost are the volumes whose engines the instance manager no longer
	// listed when the client watched it again (it had died), with when:
	// the Start that runs one again says so (Instance.Restarted).
	lost     map[string]time.Time
	synced   chan struct{} // closed at the first complete listing
	onChange []func(volume string)
	onStart  []func(volume string)
}

// Dial returns the client of the instance manager whose socket is at
// socket; onCall, when not nil, is called at each call of an engine's
// control API (the manager's metrics count them), and revive, when not
// nil, each time the watch breaks, to start the instance manager again if
// it is gone. It follows the instance manager until Close, also while it
// is down.
func Dial(socket string, log *logrus.Entry, onCall func(call string), revive func() error) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// An instance manager started again is found within a second,
		// not after gRPC's default backoff of up to two minutes.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("instance manager at %s: %w", socket, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{conn: conn, im: pb.NewInstanceManagerClient(conn), log: log, onCall: onCall, revive: revive, cancel: cancel,
		done: make(chan struct{}), engines: map[string]*remoteEngine{}, ports: map[string]int32{}, lost: map[string]time.Time{}, synced: make(chan struct{})}
	go c.follow(ctx)
	return c, nil
}

var _ instance.Instances = (*Client)(nil)

// Engine is the client of the engine service served beside the instance
// manager's, for the calls the manager forwards.
func (c *Client) Engine() enginepb.EngineClient { return enginepb.NewEngineClient(c.conn) }

// WaitSynced returns once the client has heard of every engine the
// instance manager runs, or ctx's error.
func (c *Client) WaitSynced(ctx context.Context) error {
	select {
	case <-c.synced:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the instance manager's list of engines: %w", ctx.Err())
	}
}

// Close stops following the instance manager; its engines run on.
func (c *Client) Close() {
	c.cancel()
	<-c.done
	_ = c.conn.Close()
}

func (c *Client) OnChange(f func(volume string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onChange = append(c.onChange, f)
}

func (c *Client) OnStart(f func(volume string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onStart = append(c.onStart, f)
}

// follow watches the instance manager until ctx ends, watching again
// each time the stream breaks.
func (c *Client) follow(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		err := c.watch(ctx)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		if !c.watchLost {
			c.log.WithError(err).Warn("Lost the instance manager's watch; its engines are kept as they were until it answers again")
			c.watchLost = true
		}
		if c.revive != nil {
			if err := c.revive(); err != nil {
				c.log.WithError(err).Warn("Cannot start the instance manager again")
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(rewatchDelay):
		}
	}
}

// watch follows one stream of the instance manager's events: the engines
// it runs, then their changes.
func (c *Client) watch(ctx context.Context) error {
	stream, err := c.im.Watch(ctx, &pb.Empty{})
	if err != nil {
		return err
	}
	seen := map[string]string{}
	listed := false
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		switch ev.Type {
		case pb.Event_SYNCED:
			listed = true
			if c.watchLost {
				c.log.Info("Watching the instance manager again")
				c.watchLost = false
			}
			c.synchronize(seen)
			c.connected.Store(true)
		case pb.Event_STARTED, pb.Event_CHANGED:
			if !listed {
				seen[ev.Instance.Volume] = ev.Instance.Id
			}
			_, started := c.update(ev.Instance)
			if listed {
				c.notify(ev.Instance.Volume, started || ev.Type == pb.Event_STARTED)
			}
		case pb.Event_STOPPED:
			c.remove(ev.Instance.Volume, ev.Instance.Id)
			if listed {
				c.notify(ev.Instance.Volume, false)
			}
		}
	}
}

// synchronize makes the engines those the instance manager listed (seen:
// volume to engine id), and tells the controllers to look at each.
func (c *Client) synchronize(seen map[string]string) {
	c.mu.Lock()
	first := false
	select {
	case <-c.synced:
	default:
		close(c.synced)
		first = true
	}
	var volumes []string
	lost := 0
	for v, e := range c.engines {
		if seen[v] != e.ref.Id {
			delete(c.engines, v)
			if _, running := seen[v]; !running {
				c.lost[v] = time.Now()
				lost++
			}
		}
		volumes = append(volumes, v)
	}
	for v := range seen {
		volumes = append(volumes, v)
	}
	c.mu.Unlock()
	c.log.WithFields(logrus.Fields{"engines": len(seen), "first": first}).Info("Listed the engines the instance manager runs")
	if lost > 0 {
		c.log.WithField("engines", lost).Warn("The instance manager no longer runs engines it ran: it stopped; their volumes' engines start again")
	}
	for _, v := range volumes {
		c.notify(v, false)
	}
}

// update records in as the volume's engine and returns it, saying whether
// it is one the client did not know.
func (c *Client) update(in *pb.Instance) (e *remoteEngine, started bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.engines[in.Volume]
	if ok && e.ref.Id != in.Id {
		// Another engine in place of one whose stop was never heard: the
		// instance manager lost it (it died; the watch may not have
		// listed the new one's engines yet).
		if _, marked := c.lost[in.Volume]; !marked {
			c.lost[in.Volume] = time.Now()
		}
	}
	if !ok || e.ref.Id != in.Id {
		e = newRemoteEngine(c, in)
		c.engines[in.Volume] = e
		started = true
	}
	e.observe(in)
	if port := endpointPort(in.Endpoint); port > 0 {
		c.ports[in.Volume] = port
	}
	return e, started
}

// endpointPort is the port of an nbd://host:port/export URI; 0 for none.
func endpointPort(endpoint string) int32 {
	u, err := url.Parse(endpoint)
	if err != nil {
		return 0
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return 0
	}
	return int32(port)
}

func (c *Client) remove(volume, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.engines[volume]; ok && (id == "" || e.ref.Id == id) {
		delete(c.engines, volume)
	}
	// A stop heard of is no loss.
	delete(c.lost, volume)
}

func (c *Client) notify(volume string, started bool) {
	c.mu.Lock()
	fs := c.onChange
	if started {
		fs = append(append([]func(string){}, fs...), c.onStart...)
	}
	c.mu.Unlock()
	for _, f := range fs {
		f(volume)
	}
}

func (c *Client) called(call string) {
	if c.onCall != nil {
		c.onCall(call)
	}
}

func (c *Client) Get(volume string) (instance.Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.engines[volume]
	if !ok {
		return instance.Instance{}, false
	}
	return instance.Instance{Engine: e, Endpoint: e.endpoint()}, true
}

// Start starts the volume's engine in the instance manager. Of opts, the
// term and the remote replicas are passed on (the instance manager
// reaches remote replicas with its own TLS), the frontend port is the
// client's own record.
func (c *Client) Start(volume string, size int64, replicas []instance.ReplicaDir, frontend bool, opts ...instance.StartOption) (instance.Instance, error) {
	c.mu.Lock()
	port := c.ports[volume]
	c.mu.Unlock()
	o := instance.ReadStartOptions(opts)
	req := &pb.StartRequest{Volume: volume, Size: size, Frontend: frontend, FrontendPort: port, VolumeUid: o.VolumeUID, Term: o.Term}
	for _, rr := range o.Remotes {
		req.RemoteReplicas = append(req.RemoteReplicas, &pb.RemoteReplica{Name: rr.Name, Address: rr.Address, New: rr.New})
	}
	for _, rd := range replicas {
		r := &pb.Replica{Name: rd.Name, Dir: rd.Dir, New: rd.New, Failed: rd.Failed}
		if b := rd.Backing; b != nil {
			r.Backing = &pb.BackingFile{Path: b.Path, Name: b.Name, Checksum: b.Checksum, FileSize: b.FileSize}
		}
		req.Replicas = append(req.Replicas, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	in, err := c.im.Start(ctx, req)
	if err != nil {
		return instance.Instance{}, fromStatus(err)
	}
	e, started := c.update(in)
	run := instance.Instance{Engine: e, Endpoint: e.endpoint()}
	c.mu.Lock()
	// The watch may have heard of the new engine first: whichever saw
	// the loss, the Start that returns the engine after it says so.
	if at, ok := c.lost[volume]; ok {
		delete(c.lost, volume)
		run.Restarted = fmt.Sprintf("the instance manager that ran the volume's engine stopped (noticed at %s); the engine was started again in the one that replaced it",
			at.UTC().Format(time.RFC3339))
	}
	c.mu.Unlock()
	if started {
		c.notify(volume, true)
	}
	return run, nil
}

func (c *Client) Stop(volume string) error { return c.stop(&pb.EngineRef{Volume: volume}) }

func (c *Client) StopEngine(volume string, e instance.Engine) error {
	re, ok := e.(*remoteEngine)
	if !ok {
		return nil
	}
	return c.stop(&pb.EngineRef{Volume: volume, Id: re.ref.Id})
}

func (c *Client) stop(ref *pb.EngineRef) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	_, err := c.im.Stop(ctx, ref)
	err = fromStatus(err)
	if !errors.Is(err, instance.ErrUnreachable) {
		c.remove(ref.Volume, ref.Id)
	}
	return err
}
