// Package app holds the manager's subcommands, one file each.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/app/recurringjob"
	"github.com/cadence-storage/longhorn-manager/controller"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

// DaemonOptions configure one manager daemon.
type DaemonOptions struct {
	// Namespace holds every Longhorn object the daemon manages.
	Namespace string
	// NodeName is this node's name; the Node object carries it.
	NodeName string
	// DataDir is this node's default disk.
	DataDir string
	// APIAddress is where the HTTP API listens, host:port.
	APIAddress string
	// AllowedOrigins are browser origins whose pages may open the API's
	// websocket streams besides the manager's own address (see the api
	// package's checkOrigin).
	AllowedOrigins []string
	// EngineAddress is where this node's engine service listens, host:port;
	// the host also serves the volumes' NBD frontends.
	EngineAddress string
	// Workers is the number of workers per controller.
	Workers int
	// ResyncPeriod is the informers' resync period.
	ResyncPeriod time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the requests per second the
	// daemon sends to the apiserver (client-go's token bucket).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// CronJob describes the pods of recurring-job CronJobs.
	CronJob controller.CronJobConfig
	// UpgradeAfterStep, when set, is called after each write of the
	// upgrade migration; tests return an error from it to simulate a crash.
	UpgradeAfterStep func(step string) error
	// Clock is the time source; the real clock when nil.
	Clock clock.WithTicker
	// OnReady, when set, is called once with the API's address when the
	// daemon is ready.
	OnReady func(apiAddress string)
	// RecurringJobBeforeVolume, when set, is called by the manager runner
	// before each volume's work; tests use it to hold a run midway.
	RecurringJobBeforeVolume func(ctx context.Context, job, volume string)
	// BackingImageServerCommand runs the backing image servers as child
	// processes: the binary and any leading arguments; the daemon's own
	// executable when empty. BackingImageServerEnv is added to their
	// environment. Tests point these at the test binary.
	BackingImageServerCommand []string
	BackingImageServerEnv     []string
	// BackingImageServerRunner is where the backing image servers run
	// (--backing-image-server-runner): "process", child processes of this
	// binary (the default, for a control plane with no kubelet), or "pod",
	// pods of CronJob.ManagerImage on this node with CronJob.ServiceAccount.
	BackingImageServerRunner string
	// BackingImagePodPorts, when set, are the ports of the data source and
	// manager pods' servers. For tests only: their fake kubelet runs every
	// pod's server on 127.0.0.1, so the ports must differ.
	BackingImagePodPorts [2]int32
	// BackingImageManagerImage is the default backing image manager image:
	// new managers run from it and managers of another image are replaced
	// by ones of it, reusing their files. On the local control plane the
	// servers are child processes of this binary, so it labels the version
	// that runs them. CronJob.ManagerImage when empty.
	BackingImageManagerImage string
	// BackingImageCleanupWaitUnit is the unit of the
	// backing-image-cleanup-wait-interval setting, a minute when zero.
	// For tests only: a cleanup test sets a second rather than wait
	// minutes.
	BackingImageCleanupWaitUnit time.Duration
	// OnRecurringJobFired, when set, is told by the manager runner of every
	// run it fires and how late; benchmarks use it.
	OnRecurringJobFired func(job string, tick time.Time, lateness time.Duration)
}

// recurringJobRunnerWorkers is the least number of manager-runner workers.
const recurringJobRunnerWorkers = 16

// The daemon's default request rate to the apiserver. client-go's own
// default, 5 per second, would take hours over the four or so writes each
// of 30,000 snapshots needs; the apiserver's priority and fairness still
// protects it from a busy manager.
const (
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// ioBoundWorkers multiplies --workers for the volume and snapshot
// controllers.
const ioBoundWorkers = 5

// shutdownTimeout bounds how long a stopping daemon waits for its parts.
const shutdownTimeout = 5 * time.Second

// RunDaemon runs the manager until ctx ends. It returns an error at once
// when the API cannot be reached or the CRDs are missing, so a bad
// configuration fails fast with one clear line.
func RunDaemon(ctx context.Context, cfg *rest.Config, o DaemonOptions) error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.EngineAddress == "" {
		o.EngineAddress = "127.0.0.1:0"
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	if o.KubeAPIQPS <= 0 {
		o.KubeAPIQPS = DefaultKubeAPIQPS
	}
	if o.KubeAPIBurst <= 0 {
		o.KubeAPIBurst = DefaultKubeAPIBurst
	}
	if o.NodeName == "" {
		return errors.New("--node-name (or NODE_NAME) is required")
	}
	switch o.CronJob.Runner {
	case "":
		o.CronJob.Runner = longhorn.RecurringJobRunnerCronJob
	case longhorn.RecurringJobRunnerCronJob, longhorn.RecurringJobRunnerManager:
	default:
		return fmt.Errorf("--recurring-job-runner must be %q or %q, got %q", longhorn.RecurringJobRunnerCronJob, longhorn.RecurringJobRunnerManager, o.CronJob.Runner)
	}
	switch o.BackingImageServerRunner {
	case "":
		o.BackingImageServerRunner = BackingImageServerRunnerProcess
	case BackingImageServerRunnerProcess, BackingImageServerRunnerPod:
	default:
		return backingImageServerRunnerError(o.BackingImageServerRunner)
	}
	if o.CronJob.ManagerImage == "" || o.CronJob.ServiceAccount == "" || o.CronJob.ManagerURL == "" {
		return errors.New("--manager-image, --service-account and --manager-url must not be empty")
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %q: %w", o.DataDir, err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("--data-dir %q cannot be created: %w", o.DataDir, err)
	}
	log := logrus.WithFields(logrus.Fields{"node": o.NodeName, "namespace": o.Namespace})
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg = countKubeRequests(cfg, registry)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst

	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	lhClient, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("longhorn client: %w", err)
	}
	if err := checkAPI(ctx, cfg, lhClient, o.Namespace); err != nil {
		return err
	}

	// Migrate the data before anything reads it: no controller may start on
	// half-migrated objects.
	if err := upgrade.Run(ctx, step.Clients{
		Namespace: o.Namespace, Kube: kubeClient, Longhorn: lhClient,
		Log: log.WithField("component", "upgrade"), AfterStep: o.UpgradeAfterStep,
	}, o.NodeName); err != nil {
		return err
	}

	ds, inf := newDataStore(lhClient, kubeClient, o)
	metrics := controller.NewMetrics(registry)
	apiServer := api.NewServer(log.WithField("component", "api"), ds, inf, manager.NewVolumeManager(ds), o.Clock, registry)
	apiServer.SetAllowedOrigins(o.AllowedOrigins)

	listener, err := net.Listen("tcp", o.APIAddress)
	if err != nil {
		return fmt.Errorf("--api-address %s: %w", o.APIAddress, err)
	}
	var readyReason atomic.Value
	readyReason.Store("starting")
	server := &http.Server{
		Handler: apiServer.Router(func() (bool, string) {
			r := readyReason.Load().(string)
			return r == "", r
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(listener) }()
	defer func() {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = server.Shutdown(shutdownCtx)
	}()
	log.WithField("address", listener.Addr().String()).Info("API listening")

	if created, err := ds.CreateDefaultSettings(ctx); err != nil {
		return err
	} else if len(created) > 0 {
		log.WithField("settings", created).Info("Created default settings")
	}

	runCtx, stopControllers := context.WithCancel(ctx)
	defer stopControllers()
	recorder := controller.NewEventRecorder(runCtx, kubeClient, o.Namespace, o.NodeName)
	nodeController := controller.NewNodeController(log, metrics, ds, inf, o.NodeName, o.Clock)
	settingController := controller.NewSettingController(log, metrics, ds, inf, recorder)
	recurringJobController := controller.NewRecurringJobController(log, metrics, ds, inf, o.NodeName, recorder, o.Clock, o.CronJob)
	engineListener, err := net.Listen("tcp", o.EngineAddress)
	if err != nil {
		return fmt.Errorf("--engine-address %s: %w", o.EngineAddress, err)
	}
	engineServer := rpc.NewServer()
	grpcServer := engineServer.GRPCServer()
	go func() { _ = grpcServer.Serve(engineListener) }()
	defer grpcServer.Stop()
	engineHost, _, _ := net.SplitHostPort(engineListener.Addr().String())
	var volumeController *controller.VolumeController
	instances := instance.NewManager(engineServer, engineHost, o.Clock, log.WithField("component", "engine"),
		func(volume string) { volumeController.EnqueueVolume(volume) }, metrics.EngineCall)
	defer instances.StopAll()
	serverRunner, err := newBackingImageServerRunner(log, kubeClient, o, ds)
	if err != nil {
		return err
	}
	if p, ok := serverRunner.(*controller.ProcessRunner); ok {
		// The daemon's children stop with it: by the time this runs, the
		// controllers that start servers have been stopped (see the end
		// of RunDaemon). Pods stay, for the next daemon to adopt.
		defer p.StopAll()
	}
	if o.BackingImageManagerImage == "" {
		o.BackingImageManagerImage = o.CronJob.ManagerImage
	}
	backingImageController := controller.NewBackingImageController(log, metrics, ds, inf, controller.BackingImageControllerConfig{
		NodeID: o.NodeName, ManagerImage: o.BackingImageManagerImage, Clock: o.Clock, Recorder: recorder,
		CleanupWaitUnit: o.BackingImageCleanupWaitUnit})
	dataSourceController := controller.NewBackingImageDataSourceController(log, metrics, ds, inf, o.NodeName, serverRunner, o.Clock, recorder)
	backingImageManagerController := controller.NewBackingImageManagerController(log, metrics, ds, inf, o.NodeName, o.BackingImageManagerImage, serverRunner)
	backupTargetController := controller.NewBackupTargetController(log, metrics, ds, inf, o.NodeName, recorder)
	snapshotController := controller.NewSnapshotController(log, metrics, ds, inf, o.NodeName, instances)
	volumeController = controller.NewVolumeController(log, metrics, ds, inf, o.NodeName, instances, engineListener.Addr().String(), o.Clock)

	if err := nodeController.Register(ctx, dataDir); err != nil {
		return err
	}
	// The first heartbeat goes out before the caches fill, so this node is
	// never seen as down while it starts.
	if err := ds.RenewHeartbeat(ctx, o.NodeName, controller.HeartbeatDuration, o.Clock.Now()); err != nil {
		return fmt.Errorf("node heartbeat: %w", err)
	}

	inf.Start(runCtx.Done())
	defer inf.Shutdown()
	readyReason.Store("waiting for informer caches")
	if err := ds.WaitForCacheSync(ctx); err != nil {
		return err
	}

	var wg sync.WaitGroup
	run := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(runCtx); err != nil {
				log.WithError(err).WithField("controller", name).Error("Controller stopped with an error")
			}
		}()
	}
	run("heartbeat", func(ctx context.Context) error { nodeController.RunHeartbeat(ctx); return nil })
	run("node", func(ctx context.Context) error { return nodeController.Run(ctx, o.Workers) })
	run("setting", func(ctx context.Context) error { return settingController.Run(ctx, o.Workers) })
	run("recurring-job", func(ctx context.Context) error { return recurringJobController.Run(ctx, o.Workers) })
	// Volume and snapshot syncs spend their time waiting on the apiserver's
	// answer to a write, not on the CPU, and come by the thousand (30
	// snapshots per volume): they get more workers.
	ioWorkers := ioBoundWorkers * o.Workers
	run("volume", func(ctx context.Context) error { return volumeController.Run(ctx, ioWorkers) })
	run("backup-target", func(ctx context.Context) error { return backupTargetController.Run(ctx, 1) })
	run("snapshot", func(ctx context.Context) error { return snapshotController.Run(ctx, ioWorkers) })
	run("backing-image", func(ctx context.Context) error { return backingImageController.Run(ctx, o.Workers) })
	run("backing-image-data-source", func(ctx context.Context) error { return dataSourceController.Run(ctx, o.Workers) })
	run("backing-image-manager", func(ctx context.Context) error { return backingImageManagerController.Run(ctx, o.Workers) })
	if o.CronJob.ManagerRuns() {
		runner := newManagerRunner(log, metrics, registry, ds, inf, recorder, lhClient, kubeClient, listener.Addr(), o)
		// Firing is one status write, bound by the apiserver's latency, not
		// by CPU: more workers than the other controllers keep ticks due in
		// the same minute from queueing behind each other.
		run("recurring-job-runner", func(ctx context.Context) error { return runner.Run(ctx, max(o.Workers, recurringJobRunnerWorkers)) })
	}

	readyReason.Store("")
	log.Info("Manager ready")
	if o.OnReady != nil {
		o.OnReady(listener.Addr().String())
	}

	var result error
	select {
	case <-ctx.Done():
		log.Info("Stopping manager")
	case err := <-serveErr:
		result = fmt.Errorf("API server stopped: %w", err)
	}
	stopControllers()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownTimeout):
		log.Warn("Controllers did not stop in time")
	}
	return result
}

// newManagerRunner builds the manager runner: each run is the
// recurring-job command's logic, run in this process against this
// daemon's own API.
func newManagerRunner(log *logrus.Entry, metrics *controller.Metrics, registry prometheus.Registerer, ds *datastore.DataStore, inf datastore.Informers,
	recorder record.EventRecorder, lhClient lhclientset.Interface, kubeClient kubernetes.Interface, apiAddr net.Addr, o DaemonOptions) *controller.RecurringJobRunner {
	const retryFor = 2 * time.Minute
	api := recurringjob.NewClient("http://"+loopbackAddress(apiAddr)+"/v1", retryFor)
	runLog := log.WithField("component", "recurring-job")
	run := func(ctx context.Context, job string, tick time.Time) error {
		r := &recurringjob.Runner{
			Namespace: o.Namespace, Longhorn: lhClient, Kube: kubeClient, API: api, Log: runLog,
			RetryFor: retryFor, Tick: tick, BackupTimeout: time.Hour, Decided: true, Cache: ds, BeforeVolume: o.RecurringJobBeforeVolume,
		}
		res, err := r.Run(ctx, job)
		if err != nil {
			return err
		}
		return res.Err()
	}
	return controller.NewRecurringJobRunner(log, metrics, registry, ds, inf, recorder, o.Clock,
		controller.RecurringJobRunnerConfig{Identity: o.NodeName, OnFire: o.OnRecurringJobFired}, run)
}

// Where the backing image servers run (--backing-image-server-runner).
const (
	BackingImageServerRunnerProcess = "process"
	BackingImageServerRunnerPod     = "pod"
)

func backingImageServerRunnerError(got string) error {
	return fmt.Errorf("--backing-image-server-runner must be %q or %q, got %q", BackingImageServerRunnerProcess, BackingImageServerRunnerPod, got)
}

// newBackingImageServerRunner runs the backing image servers as pods on
// this node, or as child processes of this binary on 127.0.0.1.
func newBackingImageServerRunner(log *logrus.Entry, kubeClient kubernetes.Interface, o DaemonOptions, ds *datastore.DataStore) (controller.ServerRunner, error) {
	log = log.WithField("component", "backing-image-servers")
	if o.BackingImageServerRunner == BackingImageServerRunnerPod {
		placement := func() types.PodPlacement {
			p, err := types.ParsePodPlacement(ds.GetSettingValue)
			if err != nil {
				log.WithError(err).Warn("A pod setting cannot be read or does not parse; the backing image server pod is made without it")
			}
			return p
		}
		return controller.NewPodRunner(log, kubeClient, controller.PodRunnerConfig{Namespace: o.Namespace, NodeName: o.NodeName,
			Image: o.CronJob.ManagerImage, ServiceAccount: o.CronJob.ServiceAccount,
			DataSourcePort: o.BackingImagePodPorts[0], ManagerPort: o.BackingImagePodPorts[1], Placement: placement}), nil
	}
	command := o.BackingImageServerCommand
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this binary to run the backing image servers: %w", err)
		}
		command = []string{exe}
	}
	return controller.NewProcessRunner(log, command, o.BackingImageServerEnv), nil
}

// loopbackAddress is addr with an unspecified host (0.0.0.0, ::) replaced
// by the loopback address, so this process can call itself.
func loopbackAddress(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

func newDataStore(lhClient lhclientset.Interface, kubeClient kubernetes.Interface, o DaemonOptions) (*datastore.DataStore, datastore.Informers) {
	inf := datastore.NewInformers(lhClient, kubeClient, o.Namespace, o.ResyncPeriod)
	return datastore.New(o.Namespace, lhClient, kubeClient, inf), inf
}

// checkAPI makes sure the apiserver answers and the Longhorn CRDs are
// installed, and turns each failure into one line that says what to fix.
func checkAPI(ctx context.Context, cfg *rest.Config, lhClient lhclientset.Interface, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// Discovery calls take no context: bound them through the config.
	probeCfg := rest.CopyConfig(cfg)
	probeCfg.Timeout = 15 * time.Second
	probe, err := kubernetes.NewForConfig(probeCfg)
	if err != nil {
		return err
	}
	if _, err := probe.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API at %s: %v", cfg.Host, err)
	}
	_, err = lhClient.LonghornV1beta2().Settings(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the Longhorn CRDs are not installed in the cluster at %s (apply package/crds.yaml)", cfg.Host)
	}
	if err != nil {
		return fmt.Errorf("cannot list Longhorn settings in namespace %s: %v", namespace, err)
	}
	return nil
}
