package backingimage

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

const (
	// dataSourcePollInterval is how often a data source's server is asked
	// for its file's state.
	dataSourcePollInterval = 3 * time.Second
	// dataSourceMaxPollFailures failed polls in a row end the watch; the
	// next sync starts a new one.
	dataSourceMaxPollFailures = 10
	dataSourceRestartBackoff  = 5 * time.Second
	dataSourceRestartMax      = 5 * time.Minute
	// serverPendingRecheck is how soon a server that is on its way (a pod
	// not yet running) is looked at again.
	serverPendingRecheck = 3 * time.Second
)

// DataSourceController runs the data source server of every
// BackingImageDataSource on this node, polls it and records what it says
// in the object's status. It stops the server once the file has been
// handed to a manager (spec.fileTransferred).
//
// Ownership: pinned to spec.nodeID, the node of the disk the first file is
// made on; the server must run there.
type DataSourceController struct {
	*kit.Base
	ds       *datastore.DataStore
	nodeID   string
	runner   runner.ServerRunner
	clock    clock.Clock
	recorder record.EventRecorder
	// tls is what the data sources are called with.
	tls *mtls.Identity
	// newEngineClient reaches a volume's engine (export-from-volume).
	newEngineClient func(address, volume string) (engineapi.EngineClient, error)

	monitors followers[*dataSourceMonitor]

	mu       sync.Mutex // guards restarts
	restarts map[string]*restartBackoff
}

// dataSourceMonitor polls one server; the controller reads its findings.
type dataSourceMonitor struct {
	addr      string
	serverKey string
	cancel    context.CancelFunc

	mu       sync.Mutex
	last     *datasource.FileStatus
	failures int
	lastErr  error
	stopped  bool
}

func (m *dataSourceMonitor) address() string { return m.addr }
func (m *dataSourceMonitor) end()            { m.cancel() }

type restartBackoff struct {
	failures int
	next     time.Time
}

// NewDataSourceController wires the controller to its informer.
func NewDataSourceController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers,
	nodeID string, runner runner.ServerRunner, clk clock.Clock, recorder record.EventRecorder, tls *mtls.Identity) *DataSourceController {
	informer := inf.Longhorn.Longhorn().V1beta2().BackingImageDataSources().Informer()
	c := &DataSourceController{ds: ds, nodeID: nodeID, runner: runner, clock: clk, recorder: recorder, tls: tls,
		restarts: map[string]*restartBackoff{}}
	c.newEngineClient = func(address, volume string) (engineapi.EngineClient, error) {
		return engineapi.NewGRPCClient(address, volume, engineapi.DefaultTimeout, tls)
	}
	c.Base = kit.NewBase("longhorn-backing-image-data-source", logger, metrics, c.sync, informer.HasSynced)
	informer.AddEventHandler(c.EventHandler())
	return c
}

// Run runs the controller until ctx ends, then stops every poll. The
// servers themselves are stopped by the runner's owner (the daemon).
func (c *DataSourceController) Run(ctx context.Context, workers int) error {
	defer c.monitors.stopAll()
	return c.Base.Run(ctx, workers)
}

func dataSourceServerKey(name string) string { return "backing-image-data-source/" + name }

func (c *DataSourceController) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	bids, err := c.ds.GetBackingImageDataSourceRO(name)
	if apierrors.IsNotFound(err) {
		c.stopServer(name, "its object is gone")
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if bids.Spec.NodeID != c.nodeID {
		return kit.Result{}, nil
	}
	if bids.DeletionTimestamp != nil {
		c.stopServer(name, "its object is being deleted")
		return kit.Result{}, nil
	}
	status := bids.Status.DeepCopy()
	status.OwnerID = c.nodeID
	if bids.Spec.FileTransferred {
		c.stopServer(name, "the file was handed to a manager")
		status.IP = ""
		return kit.Result{}, c.writeStatus(ctx, bids, status)
	}
	addr, serverErr := c.runner.Address(dataSourceServerKey(name))
	if serverErr != nil {
		var result kit.Result
		var err error
		if addr, result, err = c.startServer(ctx, bids, status, serverErr); addr == "" || err != nil {
			return result, err
		}
	}
	status.IP = addr
	if bids.Spec.SourceType != longhorn.BackingImageDataSourceTypeExportFromVolume || status.RunningParameters == nil {
		status.RunningParameters = bids.Spec.Parameters
	}
	m := c.ensureMonitor(key, name, addr)
	m.mu.Lock()
	last, failures, lastErr, stopped := m.last, m.failures, m.lastErr, m.stopped
	m.mu.Unlock()
	var again kit.Result
	if stopped {
		// Restart the watch: the next sync makes a new monitor.
		c.stopMonitor(name)
		status.CurrentState = longhorn.BackingImageStateUnknown
		status.Message = fmt.Sprintf("no answer from the data source server in %d polls: %v", failures, lastErr)
		c.Logger.WithFields(logrus.Fields{"backingImageDataSource": name, "address": addr}).WithError(lastErr).Warn("Restarting the watch of the data source server")
		again.RequeueAfter = dataSourcePollInterval
	} else if last != nil {
		status.CurrentState = last.State
		// A download of unknown length reports size -1 until it ends.
		status.Size, status.Progress, status.Checksum, status.Message = max(last.Size, 0), last.Progress, last.Checksum, last.Message
		if last.State == longhorn.BackingImageStateReadyForTransfer {
			c.resetRestarts(name)
		}
		if retryFailed(bids, last) {
			again.RequeueAfter = c.restartFailed(bids, last.Message)
			status.IP = ""
			if bids.Spec.SourceType == longhorn.BackingImageDataSourceTypeDownload {
				status.RunningParameters = nil
			}
		}
	} else if status.CurrentState == "" {
		status.CurrentState = longhorn.BackingImageStateStarting
	}
	return again, c.writeStatus(ctx, bids, status)
}

// startServer starts the data source's server, which is not running
// (serverErr says why), updating status. It returns the new server's
// address, or no address and the result (and error) that end the sync: a
// wait for a restart backoff, an export's volume or the server's pod, or a
// failure.
func (c *DataSourceController) startServer(ctx context.Context, bids *longhorn.BackingImageDataSource,
	status *longhorn.BackingImageDataSourceStatus, serverErr error) (string, kit.Result, error) {
	name := bids.Name
	if !errors.Is(serverErr, runner.ErrServerNotStarted) && !errors.Is(serverErr, runner.ErrServerPending) {
		// The server died: no more polls of it.
		c.stopMonitor(name)
		status.CurrentState = longhorn.BackingImageStateFailed
		status.Message = serverErr.Error()
		status.IP = ""
		if bids.Spec.SourceType == longhorn.BackingImageDataSourceTypeUpload {
			// An upload cannot be redone without the user: keep it failed.
			return "", kit.Result{}, c.writeStatus(ctx, bids, status)
		}
	}
	if wait := c.restartWait(name, serverErr); wait > 0 {
		return "", kit.Result{RequeueAfter: wait}, c.writeStatus(ctx, bids, status)
	}
	params, extra := bids.Spec.Parameters, []string(nil)
	var err error
	if bids.Spec.SourceType == longhorn.BackingImageDataSourceTypeExportFromVolume {
		params, extra, err = c.prepareExport(ctx, bids)
		if isExportWait(err) {
			// Not a failure: the export goes on once the volume is attached.
			status.CurrentState, status.Message, status.IP = longhorn.BackingImageStatePending, err.Error(), ""
			return "", kit.Result{RequeueAfter: exportWaitRecheck}, c.writeStatus(ctx, bids, status)
		}
	}
	var args []string
	if err == nil {
		args, err = dataSourceArgs(bids, params)
	}
	if err == nil {
		err = c.runner.Start(dataSourceServerKey(name), append(args, extra...), runner.WithOwner(bids, "BackingImageDataSource"))
	}
	if errors.Is(err, runner.ErrServerPending) {
		// Not a failure: the server's pod is on its way.
		status.CurrentState, status.Message, status.IP = longhorn.BackingImageStateStarting, err.Error(), ""
		status.RunningParameters = params
		return "", kit.Result{RequeueAfter: serverPendingRecheck}, c.writeStatus(ctx, bids, status)
	}
	if err != nil {
		c.Logger.WithFields(logrus.Fields{"backingImageDataSource": name}).WithError(err).Warn("Cannot start the data source server")
		wait := c.noteRestartFailure(name)
		status.CurrentState = longhorn.BackingImageStateFailed
		status.Message = err.Error()
		return "", kit.Result{RequeueAfter: wait}, c.writeStatus(ctx, bids, status)
	}
	addr, err := c.runner.Address(dataSourceServerKey(name))
	if err != nil {
		return "", kit.Result{}, err
	}
	c.Logger.WithFields(logrus.Fields{"backingImageDataSource": name, "address": addr, "sourceType": bids.Spec.SourceType}).Info("Data source server running")
	status.RunningParameters = params
	if status.CurrentState == longhorn.BackingImageStateFailed {
		// A restart after a failure: the new server's first answer
		// replaces the old reason.
		status.CurrentState = longhorn.BackingImageStateStarting
	}
	return addr, kit.Result{}, nil
}

func (c *DataSourceController) writeStatus(ctx context.Context, bids *longhorn.BackingImageDataSource, status *longhorn.BackingImageDataSourceStatus) error {
	if !kit.StatusChanged(&bids.Status, status) {
		return nil
	}
	if status.CurrentState != bids.Status.CurrentState {
		c.Logger.WithFields(logrus.Fields{"backingImageDataSource": bids.Name, "from": bids.Status.CurrentState, "to": status.CurrentState, "message": status.Message}).Info("Data source state changed")
	}
	bids = bids.DeepCopy()
	bids.Status = *status
	_, err := c.ds.UpdateBackingImageDataSourceStatus(ctx, bids)
	return err
}

// dataSourceArgs are the server's flags for the object's spec, with the
// source parameters params (the spec's, and for an export the snapshot).
func dataSourceArgs(bids *longhorn.BackingImageDataSource, params map[string]string) ([]string, error) {
	if bids.Spec.DiskPath == "" || bids.Spec.DiskUUID == "" || bids.Spec.UUID == "" {
		return nil, fmt.Errorf("spec.diskPath, spec.diskUUID and spec.uuid must be set (got %q, %q, %q)", bids.Spec.DiskPath, bids.Spec.DiskUUID, bids.Spec.UUID)
	}
	args := []string{"backing-image-data-source", "--name", bids.Name, "--uuid", bids.Spec.UUID,
		"--source-type", string(bids.Spec.SourceType), "--disk-path", bids.Spec.DiskPath, "--disk-uuid", bids.Spec.DiskUUID}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--parameter", k+"="+params[k])
	}
	if bids.Spec.Checksum != "" {
		args = append(args, "--checksum", bids.Spec.Checksum)
	}
	return args, nil
}

// restartWait is how long to wait before (re)starting the server: zero
// for a first start, a growing backoff after failures.
func (c *DataSourceController) restartWait(name string, serverErr error) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.restarts[name]
	if !errors.Is(serverErr, runner.ErrServerNotStarted) && !errors.Is(serverErr, runner.ErrServerPending) {
		if b == nil {
			b = &restartBackoff{}
			c.restarts[name] = b
		}
		if b.next.IsZero() {
			b.failures++
			b.next = c.clock.Now().Add(min(dataSourceRestartBackoff<<(b.failures-1), dataSourceRestartMax))
		}
	}
	if b == nil {
		return 0
	}
	if wait := b.next.Sub(c.clock.Now()); wait > 0 {
		return wait
	}
	b.next = time.Time{}
	return 0
}

// noteRestartFailure counts a failure of the server and answers how long
// until it may start again; the caller returns that as its RequeueAfter.
func (c *DataSourceController) noteRestartFailure(name string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.restarts[name]
	if b == nil {
		b = &restartBackoff{}
		c.restarts[name] = b
	}
	b.failures++
	b.next = c.clock.Now().Add(min(dataSourceRestartBackoff<<(b.failures-1), dataSourceRestartMax))
	return b.next.Sub(c.clock.Now())
}

func (c *DataSourceController) resetRestarts(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.restarts, name)
}

// ensureMonitor starts polling the server at addr unless that runs.
func (c *DataSourceController) ensureMonitor(key, name, addr string) *dataSourceMonitor {
	m, _ := c.monitors.ensure(name, addr, func() (*dataSourceMonitor, error) {
		ctx, cancel := context.WithCancel(context.Background())
		m := &dataSourceMonitor{addr: addr, serverKey: dataSourceServerKey(name), cancel: cancel}
		go c.poll(ctx, key, m)
		return m, nil
	})
	return m
}

// poll asks the server for the file's state every dataSourcePollInterval
// and enqueues the object when the answer changes or the watch gives up.
func (c *DataSourceController) poll(ctx context.Context, key string, m *dataSourceMonitor) {
	client := datasource.NewClient(m.addr, c.tls)
	for {
		st, err := client.Get(ctx)
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		changed := false
		if err != nil {
			m.failures++
			m.lastErr = err
			m.stopped = m.failures >= dataSourceMaxPollFailures
			changed = m.stopped
		} else {
			m.failures = 0
			changed = !reflect.DeepEqual(m.last, st)
			m.last = st
		}
		stopped := m.stopped
		m.mu.Unlock()
		if err != nil {
			if _, aerr := c.runner.Address(m.serverKey); aerr != nil {
				// The server itself is gone: the sync restarts it now, not
				// after the failures add up.
				changed = true
			}
		}
		if changed {
			c.Queue.Add(key)
		}
		if stopped {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(dataSourcePollInterval):
		}
	}
}

func (c *DataSourceController) stopMonitor(name string) { c.monitors.stop(name) }

func (c *DataSourceController) stopServer(name, why string) {
	c.stopMonitor(name)
	c.resetRestarts(name)
	stopServer(c.runner, c.Logger.WithField("backingImageDataSource", name), dataSourceServerKey(name), why)
}

// restartFailed stops a download or export server whose file failed (its
// temporary folder goes with it, so nothing half-written stays) and lets
// the next sync start a new one after the backoff, which it answers (the
// caller returns it as its RequeueAfter); an event says why. The status
// keeps the failure and its reason until then.
func (c *DataSourceController) restartFailed(bids *longhorn.BackingImageDataSource, reason string) time.Duration {
	name := bids.Name
	c.stopMonitor(name)
	c.runner.Stop(dataSourceServerKey(name))
	wait := c.noteRestartFailure(name)
	msg := fmt.Sprintf("the download failed: %s; downloading again in %s", reason, wait.Round(time.Second))
	if bids.Spec.SourceType == longhorn.BackingImageDataSourceTypeExportFromVolume {
		// The next start waits for the volume to be attached first.
		msg = fmt.Sprintf("the export failed: %s; exporting the same snapshot again in %s", reason, wait.Round(time.Second))
	}
	c.Logger.WithFields(logrus.Fields{"backingImageDataSource": name, "reason": reason, "retryIn": wait}).Warn("Data source failed: restarting it after the backoff")
	if c.recorder != nil {
		c.recorder.Event(bids, corev1.EventTypeWarning, "DataSourceFailed", msg)
	}
	return wait
}
