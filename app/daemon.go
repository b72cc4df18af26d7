// Package app holds the manager's subcommands, one file each.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
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
	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/node"
	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/managerrunner"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	"github.com/cadence-storage/longhorn-manager/jobrun"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/manager"
	lhmetrics "github.com/cadence-storage/longhorn-manager/metrics"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

// DaemonOptions configure one manager daemon.
type DaemonOptions struct {
	// Namespace holds every Longhorn object the daemon manages.
	Namespace string
	// Version is the manager's version: system backups are archived
	// under it ("dev" when empty).
	Version string
	// NodeName is this node's name; the Node object carries it.
	NodeName string
	// DataDir is this node's default disk.
	DataDir string
	// APIAddress is where the HTTP API listens, host:port.
	APIAddress string
	// MetricsAddress, when set, is where /metrics is served alone, for a
	// NetworkPolicy to open to the scraper without the API.
	MetricsAddress string
	// ProfilerAddress, when set, is a loopback host:port where Go's
	// runtime profiles are served (--profiler-address; see startProfiler).
	ProfilerAddress string
	// APIAuth is --api-auth: api.AuthNone (the default) or
	// api.AuthKubernetes (see api/auth.go).
	APIAuth string
	// APITLS serves the API over TLS (--api-tls) with this manager's leaf
	// of the cluster's internal CA, so a caller's bearer token never
	// crosses the pod network in the clear; callers check the certificate
	// with the CA's certificates (the ConfigMap mtls.CAConfigMapName).
	APITLS bool
	// APITokenAudience, under api.AuthKubernetes, is the one token
	// audience the API accepts (--api-token-audience): its callers send
	// tokens projected with it (types.APITokenPath), which are no
	// credential at the apiserver; empty accepts the apiserver's own
	// tokens. The CronJob pods get such a token.
	APITokenAudience string
	// APITokenFile is the token the manager sends to its own API (the
	// manager runner, under api.AuthKubernetes), read again on each call;
	// the kubeconfig's token when empty.
	APITokenFile string
	// APIAllowedHosts are the host names the API answers to besides IP
	// addresses, localhost and the host of CronJob.ManagerURL
	// (--api-allowed-hosts; see api.Server.SetAllowedHosts).
	APIAllowedHosts []string
	// APITimeouts are the API server's; api.DefaultTimeouts for any zero.
	APITimeouts api.Timeouts
	// AllowedOrigins are browser origins whose pages may open the API's
	// websocket streams besides the manager's own address (see the api
	// package's checkOrigin).
	AllowedOrigins []string
	// EngineAddress is where this node's engine service listens, host:port.
	EngineAddress string
	// FrontendAddress is the host the volumes' NBD frontends listen on:
	// 127.0.0.1 when empty, so a volume's data, which NBD serves to
	// anyone who connects, is not on the pod network.
	FrontendAddress string
	// ReplicaAddress (host:port; port 0 takes a free one) is where this
	// node serves its replicas to the engines of other nodes over the
	// replica protocol, with mutual TLS: the node's address in a cluster.
	// "" serves none (a volume then attaches only where its replicas are).
	ReplicaAddress string
	// CSIStateDir is the CSI Node service's state directory on this node
	// (--csi-state-dir, csi/nodestate.DefaultDir when empty): where the
	// trimFilesystem action finds which device a volume is staged on.
	CSIStateDir string
	// HostProc is where the host's /proc is mounted when the manager runs
	// in a container (--host-proc): the trimFilesystem action reads the
	// host's mount table there and runs fstrim in the host's mount
	// namespace. Empty, the manager runs on the host itself.
	HostProc string
	// BackupTargetFileRoots are the folders file:// backup targets may
	// lie in (--backup-target-file-roots; see backupstore.FileRoots):
	// none, the daemon opens no file:// target at all. The administrator
	// sets it, not an API caller: a target anywhere would let whoever may
	// set one write as root anywhere on the host.
	BackupTargetFileRoots []string
	// DefaultSettings are the values settings are created with, at the
	// first start, in place of their defaults (--default-setting
	// name=value, as Longhorn's default-setting ConfigMap gives them):
	// one node's make run lets a volume's replicas share it.
	DefaultSettings map[types.SettingName]string
	// Workers is the number of workers per controller.
	Workers int
	// ResyncPeriod is the informers' resync period.
	ResyncPeriod time.Duration
	// StartupRetryTimeout is how long the daemon retries, at start, the
	// writes the apiserver refuses for now (a control plane that is
	// starting or restarting: see apiretry.Transient) before it stops
	// with an error saying what kept failing (--startup-retry-timeout).
	// DefaultStartupRetryTimeout when zero.
	StartupRetryTimeout time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the requests per second the
	// daemon sends to the apiserver (client-go's token bucket).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// CronJob describes the pods of recurring-job CronJobs; its
	// ServiceAccount is theirs (--recurring-job-service-account, or
	// --service-account when that is empty).
	CronJob jobcontroller.CronJobConfig
	// ServiceAccount is the manager's own account (--service-account),
	// which the backing image server pods it creates run as.
	// CronJob.ServiceAccount when empty.
	ServiceAccount string
	// ManagerImage is the image of the backing image server pods
	// (--manager-image; it holds longhorn-manager). CronJob.ManagerImage
	// when empty. CronJob holds only what concerns the recurring-job pods.
	ManagerImage string
	// PodName is this manager's own pod (--pod-name, the downward API's
	// POD_NAME as deployed). When set and no image is given (ManagerImage
	// and CronJob.ManagerImage empty), the image of the pod's
	// longhorn-manager container is the recurring-job and backing image
	// server pods' image: whatever registry and tag the installer chose,
	// they run the manager's own.
	PodName string
	// Clock is the time source; the real clock when nil.
	Clock clock.WithTicker
	// BackingImageServerRunner is where the backing image servers run
	// (--backing-image-server-runner): "process", child processes of this
	// binary (the default, for a control plane with no kubelet), or "pod",
	// pods of ManagerImage on this node with ServiceAccount.
	BackingImageServerRunner string
	// InstanceManagerRunner is where the node's engines run
	// (--instance-manager-runner): "in-process", in this daemon, which
	// stops them when it stops; "process", in an instance manager process
	// of their own the daemon starts (or finds running) under
	// <data-dir>/instance-manager, which outlives the daemon; "external",
	// in one another starts there; "pod", in a pod the daemon makes on its
	// node, of ManagerImage, owned by the node's InstanceManager object
	// (package/), which a rollout of the daemon's own pods leaves running.
	InstanceManagerRunner string
	// InstanceManagerBinary is the longhorn-manager executable the
	// instance manager is started from; this daemon's own when empty.
	InstanceManagerBinary string
	// BackingImageManagerImage is the default backing image manager image:
	// new managers run from it and managers of another image are replaced
	// by ones of it, reusing their files. On the local control plane the
	// servers are child processes of this binary, so it labels the version
	// that runs them. ManagerImage when empty.
	BackingImageManagerImage string

	// apiToken is the bearer token the manager runner sends to this
	// daemon's API under --api-auth=kubernetes.
	apiToken func() string
	// Hooks are what tests and benchmarks change; the command line cannot
	// set them.
	Hooks TestHooks
}

// TestHooks let tests watch and steer a daemon. Production leaves them
// zero.
type TestHooks struct {
	// OnReady, when set, is called once with the API's address when the
	// daemon is ready.
	OnReady func(apiAddress string)
	// RecurringJobBeforeVolume, when set, is called by the manager runner
	// before each volume's work, to hold a run midway.
	RecurringJobBeforeVolume func(ctx context.Context, job, volume string)
	// BackingImageServerCommand runs the backing image servers as child
	// processes: the binary and any leading arguments; the daemon's own
	// executable when empty. BackingImageServerEnv is added to their
	// environment. Tests point these at the test binary.
	BackingImageServerCommand []string
	BackingImageServerEnv     []string
	// BackingImagePodPorts, when set, are the ports of the data source and
	// manager pods' servers: the tests' fake kubelet runs every pod's
	// server on 127.0.0.1, so the ports must differ.
	BackingImagePodPorts [2]int32
	// BackingImageCleanupWaitUnit is the unit of the
	// backing-image-cleanup-wait-interval setting, a minute when zero, so
	// a cleanup test waits seconds rather than minutes.
	BackingImageCleanupWaitUnit time.Duration
	// OnRecurringJobFired, when set, is told by the manager runner of
	// every run it fires and how late; benchmarks use it.
	OnRecurringJobFired func(job string, tick time.Time, lateness time.Duration)
	// OnAPIRequestOverNetwork, when set, is told of each request the API
	// serves on its port (not those the manager runner makes in process).
	OnAPIRequestOverNetwork func(r *http.Request)
}

// RecurringJobRunnerWorkers is the least number of manager-runner workers.
const RecurringJobRunnerWorkers = 16

// The daemon's default request rate to the apiserver. client-go's own
// default, 5 per second, would take hours over the four or so writes each
// of 30,000 snapshots needs; the apiserver's priority and fairness still
// protects it from a busy manager.
const (
	DefaultKubeAPIQPS   = 200
	DefaultKubeAPIBurst = 400
)

// authReviewQPS bounds the API's TokenReviews and SubjectAccessReviews
// together, on a client of their own (--api-auth=kubernetes).
const authReviewQPS = 50

// ioBoundWorkers multiplies --workers for the volume, snapshot and
// recurring job controllers.
const ioBoundWorkers = 5

// shutdownTimeout bounds how long a stopping daemon waits for its parts.
const shutdownTimeout = 5 * time.Second

// RunDaemon runs the manager until ctx ends. It returns an error at once
// when the API cannot be reached or the CRDs are missing, so a bad
// configuration fails fast with one clear line. It runs in steps: check
// the options, connect, migrate, serve the API, build the engine service
// and the controllers, register the node, then run until stopped.
func RunDaemon(ctx context.Context, cfg *rest.Config, o DaemonOptions) error {
	if err := o.complete(); err != nil {
		return err
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("--data-dir %q: %w", o.DataDir, err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return fmt.Errorf("--data-dir %q cannot be created: %w", o.DataDir, err)
	}
	log := logrus.WithFields(logrus.Fields{"node": o.NodeName, "namespace": o.Namespace})
	// Before anything opens a backup target: the file:// targets of this
	// process are confined from its start, to nothing when no root is
	// given.
	fileRoots, err := backupstore.NewFileRoots(o.BackupTargetFileRoots)
	if err != nil {
		return fmt.Errorf("--backup-target-file-roots: %w", err)
	}
	backupstore.ConfineFileTargets(fileRoots)
	if o.ProfilerAddress != "" {
		profCtx, stopProfiler := context.WithCancel(ctx)
		defer stopProfiler()
		if _, err := startProfiler(profCtx, log.WithField("component", "profiler"), o.ProfilerAddress); err != nil {
			return err
		}
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	cfg = countKubeRequests(cfg, registry)
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	cfg.WarningHandler = newOnceWarnings(log)
	kubeClient, lhClient, err := connect(ctx, cfg, o.Namespace)
	if err != nil {
		return err
	}
	if err := o.ownImage(ctx, kubeClient); err != nil {
		return err
	}
	// Said once the start is past what ends it with one line (bad flags,
	// no apiserver).
	log.WithField("backupTargetFileRoots", fileRoots.Roots()).Info("file:// backup targets are confined to these folders (none: file:// targets are refused)")
	// Every write at start is retried while the apiserver refuses it for
	// now, up to --startup-retry-timeout.
	startupRetry := apiretry.Policy{Timeout: o.StartupRetryTimeout}
	startLog := log.WithField("component", "startup")
	retryAtStart := func(what string, fn func(context.Context) error) error {
		return apiretry.Do(ctx, startupRetry, startLog, what, fn)
	}
	// A control plane that has just (re)started refuses some creates for
	// a few seconds; start nothing until it takes a write of every kind.
	if err := waitForWrites(ctx, startLog, lhClient, o.Namespace, startupRetry); err != nil {
		return err
	}

	// Migrate the data before anything reads it: no controller may start on
	// half-migrated objects.
	if err := upgrade.Run(ctx, step.Clients{
		Namespace: o.Namespace, Kube: kubeClient, Longhorn: lhClient,
		Log: log.WithField("component", "upgrade"), Retry: startupRetry,
	}, o.NodeName); err != nil {
		return err
	}

	// The internal calls (engines, backing image servers) are mutual TLS
	// from the first: no server starts before there is an identity.
	tlsCtx, stopTLS := context.WithCancel(ctx)
	defer stopTLS()
	var internal internalTLS
	if err := retryAtStart("keep the internal TLS", func(context.Context) (err error) {
		internal, err = startInternalTLS(tlsCtx, log, kubeClient, o, dataDir)
		return err
	}); err != nil {
		return err
	}

	ds, inf := newDataStore(lhClient, kubeClient, o)
	metrics := kit.NewMetrics(registry)
	backupMetrics := lhmetrics.New(log, ds, inf, o.NodeName, o.Clock)
	registry.MustRegister(backupMetrics)
	apiServer := api.NewServer(log.WithField("component", "api"), ds, inf, manager.NewVolumeManager(ds), o.Clock, registry)
	apiServer.SetAllowedOrigins(o.AllowedOrigins)
	apiServer.SetInternalTLS(internal.id)
	apiServer.SetManagerServiceAccount(cmp.Or(o.ServiceAccount, api.DefaultManagerServiceAccount))
	if o.InstanceManagerRunner == InstanceManagerPod {
		// The instance managers run the manager's image: its engines are
		// the default engine image's.
		apiServer.SetEngineImage(o.ManagerImage)
	}
	defer apiServer.Close()
	if o.APIAuth == api.AuthKubernetes {
		// The reviews get a client of their own, with its own rate limit:
		// a flood of tokens never delays the controllers' requests or the
		// node's heartbeat.
		authCfg := rest.CopyConfig(cfg)
		authCfg.QPS, authCfg.Burst = authReviewQPS, 2*authReviewQPS
		authClient, err := kubernetes.NewForConfig(authCfg)
		if err != nil {
			return fmt.Errorf("the API's authentication client: %w", err)
		}
		var audiences []string
		if o.APITokenAudience != "" {
			audiences = []string{o.APITokenAudience}
		}
		apiServer.EnableKubernetesAuth(authClient, o.Namespace, audiences...)
		o.apiToken = bearerTokenSource(cfg)
		if o.APITokenFile != "" {
			o.apiToken = tokenFile(o.APITokenFile)
		}
	}
	served, err := serveAPI(log, apiServer, o, internal.id)
	if err != nil {
		return err
	}
	defer served.shutdown()
	if o.MetricsAddress != "" {
		stopMetrics, err := serveMetrics(log, apiServer, o)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}

	var created []types.SettingName
	if err := retryAtStart("create the default settings", func(ctx context.Context) error {
		more, err := ds.CreateDefaultSettings(ctx, o.DefaultSettings)
		created = append(created, more...)
		return err
	}); err != nil {
		return err
	}
	if len(created) > 0 {
		log.WithField("settings", created).Info("Created default settings")
	}

	runCtx, stopControllers := context.WithCancel(ctx)
	defer stopControllers()
	engines, err := startEngineService(log, ds, kubeClient, lhClient, o, metrics, internal)
	if err != nil {
		return err
	}
	defer engines.stop()
	ctrls, err := newControllers(runCtx, log, metrics, registry, ds, inf, kubeClient, lhClient, engines, served.handler, internal, o)
	if err != nil {
		return err
	}
	backupMetrics.WatchTarget(ctrls.backupTarget.Healths)
	defer ctrls.stop()

	if err := retryAtStart("register Node "+o.NodeName, func(ctx context.Context) error {
		return ctrls.node.Register(ctx, dataDir)
	}); err != nil {
		return err
	}
	// The first heartbeat goes out before the caches fill, so this node is
	// never seen as down while it starts.
	if err := retryAtStart("renew the heartbeat Lease of "+o.NodeName, func(ctx context.Context) error {
		return ds.RenewHeartbeat(ctx, o.NodeName, node.HeartbeatDuration, o.Clock.Now())
	}); err != nil {
		return fmt.Errorf("node heartbeat: %w", err)
	}

	inf.Start(runCtx.Done())
	defer inf.Shutdown()
	served.ready.Store("waiting for informer caches")
	if err := ds.WaitForCacheSync(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	ctrls.run(runCtx, log, &wg, o.Workers)

	served.ready.Store("")
	log.Info("Manager ready")
	if o.Hooks.OnReady != nil {
		o.Hooks.OnReady(served.addr.String())
	}

	var result error
	select {
	case <-ctx.Done():
		log.Info("Stopping manager")
	case err := <-served.err:
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

// complete fills the defaults of unset options and refuses invalid ones,
// naming the flag.
func (o *DaemonOptions) complete() error {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.FrontendAddress == "" {
		o.FrontendAddress = "127.0.0.1"
	}
	if o.EngineAddress == "" {
		o.EngineAddress = "127.0.0.1:0"
	}
	switch o.InstanceManagerRunner {
	case "":
		o.InstanceManagerRunner = InstanceManagerInProcess
	case InstanceManagerInProcess, InstanceManagerProcess, InstanceManagerExternal, InstanceManagerPod:
	default:
		return fmt.Errorf("--instance-manager-runner must be %q, %q, %q or %q, got %q", InstanceManagerInProcess, InstanceManagerProcess, InstanceManagerExternal, InstanceManagerPod, o.InstanceManagerRunner)
	}
	if o.ResyncPeriod <= 0 {
		o.ResyncPeriod = 30 * time.Second
	}
	// The recurring jobs are looked at again by their controller's sweep,
	// at the informers' period (they have no informer resync).
	o.CronJob.ResyncPeriod = o.ResyncPeriod
	if o.StartupRetryTimeout <= 0 {
		o.StartupRetryTimeout = DefaultStartupRetryTimeout
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
	if (o.CronJob.ManagerImage == "" && o.PodName == "") || o.CronJob.ServiceAccount == "" || o.CronJob.ManagerURL == "" {
		return errors.New("--manager-image (or --pod-name, to run this pod's image), --service-account and --manager-url must not be empty")
	}
	if o.ServiceAccount == "" {
		o.ServiceAccount = o.CronJob.ServiceAccount
	}
	if o.ManagerImage == "" {
		o.ManagerImage = o.CronJob.ManagerImage
	}
	if o.BackingImageManagerImage == "" {
		o.BackingImageManagerImage = o.ManagerImage
	}
	if err := checkAPIAuth(o.APIAuth); err != nil {
		return err
	}
	if o.APITokenAudience != "" && o.APIAuth != api.AuthKubernetes {
		return fmt.Errorf("--api-token-audience %q needs --api-auth=%s: with --api-auth=%q the API checks no token", o.APITokenAudience, api.AuthKubernetes, o.APIAuth)
	}
	o.CronJob.APITokenAudience = o.APITokenAudience
	return nil
}

// connect makes the clients and checks that the apiserver answers and
// holds the CRDs.
func connect(ctx context.Context, cfg *rest.Config, namespace string) (kubernetes.Interface, lhclientset.Interface, error) {
	kubeClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	lhClient, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("longhorn client: %w", err)
	}
	if err := checkAPI(ctx, cfg, lhClient, namespace); err != nil {
		return nil, nil, err
	}
	return kubeClient, lhClient, nil
}

// newManagerRunner builds the manager runner: each run is the
// recurring-job command's logic, run in this process against this
// daemon's own API.
func newManagerRunner(log *logrus.Entry, metrics *kit.Metrics, registry prometheus.Registerer, ds *datastore.DataStore, inf datastore.Informers,
	recorder record.EventRecorder, lhClient lhclientset.Interface, kubeClient kubernetes.Interface, apiHandler http.Handler, o DaemonOptions) *managerrunner.Runner {
	const retryFor = 2 * time.Minute
	// The runs call this daemon's API in process: its handler, with the
	// same authentication and checks as a CronJob pod's calls over the
	// network, and no socket or TLS of its own.
	api := client.NewInProcess(apiHandler, retryFor)
	api.Token = o.apiToken
	runLog := log.WithField("component", "recurring-job")
	run := func(ctx context.Context, job string, tick time.Time) (*types.RecurringJobRunVolumes, error) {
		r := &jobrun.Executor{
			Namespace: o.Namespace, Longhorn: lhClient, Kube: kubeClient, API: api, Log: runLog,
			RetryFor: retryFor, Tick: tick, BackupTimeout: time.Hour, Decided: true, LeaveRecord: true, Cache: ds,
			BeforeVolume: o.Hooks.RecurringJobBeforeVolume, Recorder: recorder,
		}
		res, err := r.Run(ctx, job)
		if err != nil {
			return nil, err
		}
		return res.Record, res.Err()
	}
	return managerrunner.New(log, metrics, registry, ds, inf, recorder, o.Clock, managerrunner.Config{
		Identity: o.NodeName, SkipImmediatelyDefault: o.CronJob.SkipImmediatelyDefault, OnFire: o.Hooks.OnRecurringJobFired,
	}, run)
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
func newBackingImageServerRunner(log *logrus.Entry, kubeClient kubernetes.Interface, o DaemonOptions, ds *datastore.DataStore, tls internalTLS) (runner.ServerRunner, error) {
	log = log.WithField("component", "backing-image-servers")
	if o.BackingImageServerRunner == BackingImageServerRunnerPod {
		placement := podPlacement(log, ds)
		return runner.NewPodRunner(log, kubeClient, runner.PodRunnerConfig{Namespace: o.Namespace, NodeName: o.NodeName,
			Image: o.ManagerImage, ServiceAccount: o.ServiceAccount,
			DataSourcePort: o.Hooks.BackingImagePodPorts[0], ManagerPort: o.Hooks.BackingImagePodPorts[1], Placement: placement}), nil
	}
	command := o.Hooks.BackingImageServerCommand
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this binary to run the backing image servers: %w", err)
		}
		command = []string{exe}
	}
	r := runner.NewProcessRunner(log, command, o.Hooks.BackingImageServerEnv)
	r.TLSDir, r.DataSourceTLSDir = tls.serverDir, tls.dataSourceDir
	return r, nil
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
