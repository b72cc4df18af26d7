package app

// The parts RunDaemon builds, in the order it builds them: the API server,
// this node's engine service, and the controllers.

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"

	bicontroller "github.com/cadence-storage/longhorn-manager/controller/backingimage"
	imcontroller "github.com/cadence-storage/longhorn-manager/controller/instancemanager"
	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/managerrunner"
	"github.com/cadence-storage/longhorn-manager/internal/fsfreeze"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
	"github.com/cadence-storage/longhorn-manager/mtls"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/controller/backup"
	"github.com/cadence-storage/longhorn-manager/controller/backuptarget"
	"github.com/cadence-storage/longhorn-manager/controller/backupverify"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/node"
	"github.com/cadence-storage/longhorn-manager/controller/pvc"
	replicacontroller "github.com/cadence-storage/longhorn-manager/controller/replica"
	"github.com/cadence-storage/longhorn-manager/controller/setting"
	"github.com/cadence-storage/longhorn-manager/controller/snapshot"
	sbcontroller "github.com/cadence-storage/longhorn-manager/controller/systembackup"
	"github.com/cadence-storage/longhorn-manager/controller/volume"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/client-go/kubernetes"
)

// servedAPI is the API server once it listens.
type servedAPI struct {
	addr net.Addr
	// handler is what serves the API, for the manager runner's calls in
	// process.
	handler http.Handler
	// ready holds why the daemon is not ready ("" once it is), for
	// /readyz.
	ready    *atomic.Value
	err      chan error
	shutdown func()
}

// serveAPI starts serving the API on --api-address.
func serveAPI(log *logrus.Entry, apiServer *api.Server, o DaemonOptions, id *mtls.Identity) (*servedAPI, error) {
	listener, err := net.Listen("tcp", o.APIAddress)
	if err != nil {
		return nil, fmt.Errorf("--api-address %s: %w", o.APIAddress, err)
	}
	if o.APITLS {
		listener = tls.NewListener(listener, id.APIServerConfig())
	}
	ready := &atomic.Value{}
	ready.Store("starting")
	apiServer.SetTimeouts(o.APITimeouts)
	apiServer.SetAllowedHosts(apiAllowedHosts(o))
	handler := apiServer.Router(func() (bool, string) {
		r := ready.Load().(string)
		return r == "", r
	})
	onNetwork := handler
	if seen := o.Hooks.OnAPIRequestOverNetwork; seen != nil {
		onNetwork = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen(r)
			handler.ServeHTTP(w, r)
		})
	}
	server := api.HTTPServer(onNetwork, o.APITimeouts)
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(listener) }()
	log.WithFields(logrus.Fields{"address": listener.Addr().String(), "tls": o.APITLS}).Info("API listening")
	return &servedAPI{addr: listener.Addr(), handler: handler, ready: ready, err: serveErr, shutdown: func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}}, nil
}

// serveMetrics serves /metrics alone on --metrics-address, and returns
// what stops it.
func serveMetrics(log *logrus.Entry, apiServer *api.Server, o DaemonOptions) (func(), error) {
	listener, err := net.Listen("tcp", o.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("--metrics-address %s: %w", o.MetricsAddress, err)
	}
	server := api.HTTPServer(apiServer.MetricsOnly(), o.APITimeouts)
	go func() { _ = server.Serve(listener) }()
	log.WithField("address", listener.Addr().String()).Info("Metrics listening")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = server.Shutdown(ctx)
	}, nil
}

// engineService is this node's engine gRPC service and the engines it
// serves. The volume controller, made later, is told of engine changes
// through onChange.
type engineService struct {
	instances instance.Instances
	address   string
	onChange  func(volume string)
	stop      func()
	// im are the node's instance managers when they are pods the daemon
	// keeps (--instance-manager-runner=pod); nil otherwise.
	im *instanceManagerPods
	// freezer freezes a volume's mounted filesystem for its snapshots,
	// as its policy asks.
	freezer fsfreeze.Guard
	// replicas serves the node's replicas to other nodes' engines (the
	// instance manager's client, the pod runner's Set of them, or this
	// process); nil when nothing does.
	replicas instance.ReplicaServer
}

func startEngineService(log *logrus.Entry, ds *datastore.DataStore, kubeClient kubernetes.Interface, lhClient lhclientset.Interface,
	o DaemonOptions, metrics *kit.Metrics, internal internalTLS) (*engineService, error) {
	id := internal.id
	listener, err := net.Listen("tcp", o.EngineAddress)
	if err != nil {
		return nil, fmt.Errorf("--engine-address %s: %w", o.EngineAddress, err)
	}
	e := &engineService{address: listener.Addr().String()}
	onChange := func(volume string) {
		if e.onChange != nil {
			e.onChange(volume)
		}
	}
	trimmer := fstrim.Trimmer{StateDir: o.CSIStateDir, HostProc: o.HostProc}
	e.freezer = freezeGuard(log, ds, trimmer)
	// Only a caller with a certificate of the cluster's internal CA is
	// answered: other managers, the data sources that export volumes.
	var grpcServer *grpc.Server
	if o.InstanceManagerRunner != InstanceManagerInProcess {
		instances, route, im, err := startInstanceManager(log, o, metrics, ds, kubeClient, lhClient, internal.serverDir)
		if err != nil {
			_ = listener.Close()
			return nil, err
		}
		instances.OnChange(onChange)
		e.instances, e.im = instances, im
		if rs, ok := instances.(instance.ReplicaServer); ok {
			e.replicas = rs
		}
		forwarder := rpc.NewForwarder(route, enginePolicy(ds), trimmer)
		forwarder.SetFreezer(e.freezer)
		grpcServer = forwarder.GRPCServer(id.GRPCServerOption())
	} else {
		engineServer := rpc.NewServer()
		engineServer.SetPolicy(enginePolicy(ds))
		engineServer.SetTrimmer(trimmer)
		engineServer.SetFreezer(e.freezer)
		grpcServer = engineServer.GRPCServer(id.GRPCServerOption())
		rs, err := instance.ServeReplicas(o.ReplicaAddress, id.ServerConfig(), log.WithField("component", "replica-server"))
		if err != nil {
			_ = listener.Close()
			return nil, fmt.Errorf("--replica-address: %w", err)
		}
		e.replicas = rs
		e.instances = instance.Local(instance.NewEngines(engineServer, o.FrontendAddress, o.Clock, log.WithField("component", "engine"),
			onChange, metrics.EngineCall), instance.WithReplicaTLS(id.ClientConfig()))
	}
	go func() { _ = grpcServer.Serve(listener) }()
	e.stop = func() {
		e.instances.Close()
		if rs, ok := e.replicas.(*instance.ReplicaService); ok {
			rs.Close()
		}
		grpcServer.Stop()
	}
	return e, nil
}

// controllers are the daemon's controllers, built and not yet running.
type controllers struct {
	node          *node.Controller
	setting       *setting.Controller
	recurringJob  *jobcontroller.Controller
	runner        *managerrunner.Runner // nil unless the manager runs jobs
	volume        *volume.Controller
	replica       *replicacontroller.Controller
	kubernetesPV  *pvc.Controller
	snapshot      *snapshot.Controller
	backupTarget  *backup.TargetController
	targetSync    *backuptarget.Controller
	backupVerify  *backupverify.Controller
	systemBackup  *sbcontroller.BackupController
	systemRestore *sbcontroller.RestoreController
	backingImage  *bicontroller.ImageController
	dataSource    *bicontroller.DataSourceController
	imageManager  *bicontroller.ManagerController
	// instanceManager is nil unless the node's instance manager is a pod
	// the daemon keeps.
	instanceManager *imcontroller.Controller
	stopProcesses   func()
}

func newControllers(runCtx context.Context, log *logrus.Entry, metrics *kit.Metrics, registry prometheus.Registerer, ds *datastore.DataStore, inf datastore.Informers,
	kubeClient kubernetes.Interface, lhClient lhclientset.Interface, engines *engineService, apiHandler http.Handler, internal internalTLS, o DaemonOptions) (*controllers, error) {
	recorder := kit.NewEventRecorder(runCtx, kubeClient, o.Namespace, o.NodeName)
	serverRunner, err := newBackingImageServerRunner(log, kubeClient, o, ds, internal)
	if err != nil {
		return nil, err
	}
	c := &controllers{
		node:         node.NewController(log, metrics, ds, inf, o.NodeName, o.Clock),
		setting:      setting.NewController(log, metrics, ds, inf, recorder),
		recurringJob: jobcontroller.NewController(log, metrics, ds, inf, o.NodeName, recorder, o.Clock, o.CronJob),
		backingImage: bicontroller.NewImageController(log, metrics, ds, inf, bicontroller.ImageControllerConfig{
			NodeID: o.NodeName, ManagerImage: o.BackingImageManagerImage, Clock: o.Clock, Recorder: recorder,
			CleanupWaitUnit: o.Hooks.BackingImageCleanupWaitUnit}),
		dataSource:    bicontroller.NewDataSourceController(log, metrics, ds, inf, o.NodeName, guardDownloads(serverRunner, ds), o.Clock, recorder, internal.id),
		imageManager:  bicontroller.NewManagerController(log, metrics, ds, inf, o.NodeName, o.BackingImageManagerImage, serverRunner, internal.id),
		backupTarget:  backup.NewTargetController(log, metrics, ds, inf, o.NodeName, recorder),
		targetSync:    backuptarget.NewController(log, metrics, ds, inf, o.NodeName, recorder),
		backupVerify:  backupverify.NewController(log, metrics, ds, inf, o.NodeName, o.DataDir, recorder),
		snapshot:      snapshot.NewController(log, metrics, ds, inf, o.NodeName, engines.instances),
		volume:        volume.NewController(log, metrics, ds, inf, o.NodeName, engines.instances, engines.address, o.Clock, recorder),
		replica:       replicacontroller.NewController(log, metrics, ds, inf, o.NodeName, engines.replicas),
		stopProcesses: func() {},
	}
	sbConfig := sbcontroller.Config{NodeID: o.NodeName, Version: cmp.Or(o.Version, "dev"), ManagerImage: o.ManagerImage, InternalTLS: internal.id,
		ManagerUser: rights.ServiceAccountUser(o.Namespace, cmp.Or(o.ServiceAccount, api.DefaultManagerServiceAccount))}
	c.systemBackup = sbcontroller.NewBackupController(log, metrics, ds, inf, sbConfig)
	c.systemRestore = sbcontroller.NewRestoreController(log, metrics, ds, inf, kubeClient, sbConfig)
	if c.kubernetesPV, err = pvc.NewController(log, metrics, ds, inf, o.NodeName, o.Clock, recorder); err != nil {
		return nil, err
	}
	c.snapshot.SetFreezer(engines.freezer)
	engines.onChange = c.volume.EnqueueVolume
	if im := engines.im; im != nil {
		c.instanceManager = imcontroller.NewController(log, metrics, inf, im.keeper, im.set)
		im.set.OnChange(func(string) { c.instanceManager.Changed() })
	}
	if p, ok := serverRunner.(*runner.ProcessRunner); ok {
		// The daemon's children stop with it, once the controllers that
		// start servers have stopped. Pods stay, for the next daemon to
		// adopt.
		c.stopProcesses = p.StopAll
	}
	if o.CronJob.ManagerRuns() {
		c.runner = newManagerRunner(log, metrics, registry, ds, inf, recorder, lhClient, kubeClient, apiHandler, o)
	}
	return c, nil
}

// run starts every controller in its goroutine, counted in wg; each stops
// when ctx ends.
func (c *controllers) run(ctx context.Context, log *logrus.Entry, wg *sync.WaitGroup, workers int) {
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil {
				log.WithError(err).WithField("controller", name).Error("Controller stopped with an error")
			}
		}()
	}
	run("heartbeat", func(ctx context.Context) error { c.node.RunHeartbeat(ctx); return nil })
	run("node", func(ctx context.Context) error { return c.node.Run(ctx, workers) })
	run("setting", func(ctx context.Context) error { return c.setting.Run(ctx, workers) })
	// Volume, snapshot and recurring job syncs spend their time waiting on
	// the apiserver's answer to a write, not on the CPU, and come by the
	// thousand (30 snapshots per volume, 10,000 jobs taken in at start):
	// they get more workers.
	ioWorkers := ioBoundWorkers * workers
	run("recurring-job", func(ctx context.Context) error { return c.recurringJob.Run(ctx, ioWorkers) })
	run("volume", func(ctx context.Context) error { return c.volume.Run(ctx, ioWorkers) })
	run("replica", func(ctx context.Context) error {
		if err := c.replica.Adopt(); err != nil {
			log.WithError(err).Warn("Cannot list the replicas the node serves; each is looked at when its Replica next changes")
		}
		return c.replica.Run(ctx, workers)
	})
	run("kubernetes-pv", func(ctx context.Context) error { return c.kubernetesPV.Run(ctx, workers) })
	run("backup-target", func(ctx context.Context) error { return c.backupTarget.Run(ctx, 1) })
	run("backup-target-settings", func(ctx context.Context) error { return c.targetSync.Run(ctx, 1) })
	// One drill at a time, each reading backup-concurrent-limit blocks at
	// once: a drill reads a whole backup, and must not crowd out backups
	// and restores.
	run("backup-verify", func(ctx context.Context) error { return c.backupVerify.Run(ctx, 1) })
	// A system backup's sync waits for its volume backups: two workers,
	// so that a deletion or the target's sync is not held up by one.
	run("system-backup", func(ctx context.Context) error { return c.systemBackup.Run(ctx, 2) })
	run("system-restore", func(ctx context.Context) error { return c.systemRestore.Run(ctx, 1) })
	run("snapshot", func(ctx context.Context) error { return c.snapshot.Run(ctx, ioWorkers) })
	run("backing-image", func(ctx context.Context) error { return c.backingImage.Run(ctx, workers) })
	run("backing-image-data-source", func(ctx context.Context) error { return c.dataSource.Run(ctx, workers) })
	run("backing-image-manager", func(ctx context.Context) error { return c.imageManager.Run(ctx, workers) })
	if c.instanceManager != nil {
		run("instance-manager", func(ctx context.Context) error { return c.instanceManager.Run(ctx, 1) })
	}
	if c.runner != nil {
		// Firing is one status write, bound by the apiserver's latency, not
		// by CPU: more workers than the other controllers keep ticks due in
		// the same minute from queueing behind each other.
		run("recurring-job-runner", func(ctx context.Context) error { return c.runner.Run(ctx, max(workers, RecurringJobRunnerWorkers)) })
	}
}

// stop ends what the controllers started that outlives them: the backing
// image server processes.
func (c *controllers) stop() { c.stopProcesses() }
