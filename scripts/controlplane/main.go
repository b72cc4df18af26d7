// Command controlplane runs a real, single-process Kubernetes control plane
// for local development and integration tests: embedded etcd, kube-apiserver
// and the parts of kube-controller-manager the manager relies on (garbage
// collector, namespace, Job and CronJob controllers).
//
// With --cluster it is the control plane of a real node's cluster (see
// docs/cluster.md): the ServiceAccount admission plugin puts each pod's
// token volume in, and kube-scheduler runs in this process too, to place
// the pods a kubelet then runs. The caller names the controllers such a
// cluster needs (DaemonSet, Deployment, ...) with --controllers.
//
// It lives in its own Go module because k8s.io/kubernetes pins every
// k8s.io staging module, and the manager's module must stay free to follow
// the current client-go.
//
// Usage:
//
//	controlplane --data-dir .dev/controlplane --kubeconfig .dev/kubeconfig --crd-dir k8s/crds
//
// When the control plane is ready it writes the kubeconfig (atomically) and
// prints one line "ready kubeconfig=<path> server=<url>" on standard output.
// SIGINT or SIGTERM stops everything; etcd data stays in --data-dir, so the
// next start sees the same objects.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

type options struct {
	dataDir       string
	kubeconfig    string
	crdDir        string
	controllers   string
	noControllers bool
	// kcmQPS and kcmBurst are kube-controller-manager's client-side
	// request limits (its --kube-api-qps, --kube-api-burst); 0 keeps its
	// defaults (20, 30).
	kcmQPS     float64
	kcmBurst   int
	namespaces string
	verbosity  string
	// cluster runs the control plane of a cluster with a kubelet: the
	// ServiceAccount admission plugin and kube-scheduler.
	cluster bool
	// advertise is, in cluster mode, the node's address the apiserver
	// also serves on and advertises as the kubernetes Service's endpoint.
	advertise string
}

func main() {
	var o options
	// A flag set of its own: the Kubernetes packages register their flags
	// (klog's -v among them) on the global one.
	fs := flag.NewFlagSet("controlplane", flag.ExitOnError)
	fs.StringVar(&o.dataDir, "data-dir", ".dev/controlplane", "folder for etcd data and logs; kept across restarts")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default <data-dir>/kubeconfig)")
	fs.StringVar(&o.crdDir, "crd-dir", "", "folder of CustomResourceDefinition YAML files applied before the controllers start")
	fs.StringVar(&o.controllers, "controllers", "garbagecollector,namespace,job,cronjob", "kube-controller-manager controllers to run")
	fs.StringVar(&o.namespaces, "namespaces", "", "comma-separated namespaces to create when missing")
	fs.BoolVar(&o.noControllers, "no-controller-manager", false, "run etcd and kube-apiserver only")
	fs.Float64Var(&o.kcmQPS, "controller-manager-qps", 0, "kube-controller-manager's --kube-api-qps (0: its default, 20)")
	fs.IntVar(&o.kcmBurst, "controller-manager-burst", 0, "kube-controller-manager's --kube-api-burst (0: its default, 30)")
	fs.BoolVar(&o.cluster, "cluster", false, "the control plane of a cluster with a kubelet: ServiceAccount admission and kube-scheduler")
	fs.StringVar(&o.advertise, "advertise-address", "", "with --cluster: an address of this machine the apiserver also serves on, the kubernetes Service's endpoint (pods reach the apiserver there)")
	fs.StringVar(&o.verbosity, "verbosity", "0", "klog verbosity of the Kubernetes components (their logs go to <data-dir>/controlplane.log)")
	fs.Parse(os.Args[1:])
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(o.dataDir, "kubeconfig")
	}

	if o.advertise != "" && (!o.cluster || net.ParseIP(o.advertise) == nil) {
		fmt.Fprintf(os.Stderr, "controlplane: --advertise-address %q: an IP address, with --cluster only\n", o.advertise)
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run(o options) (err error) {
	// The apiserver's test server reports fatal start-up problems through
	// its TB; processTB turns those into a panic that ends here as an error.
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("start-up failed: %s", f.msg)
		}
	}()
	// The data folder holds etcd's data (every Secret, the cluster's CA
	// keys) and its sockets: its user's alone, also when an older run made
	// it open to others.
	if err := os.MkdirAll(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	if err := os.Chmod(o.dataDir, 0o700); err != nil {
		return fmt.Errorf("close data dir %s to other users: %w", o.dataDir, err)
	}
	logFile, err := os.OpenFile(filepath.Join(o.dataDir, "controlplane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log file: %w", err)
	}
	defer logFile.Close()
	if err := quietKlog(logFile, o.verbosity); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	etcd, err := startEtcd(filepath.Join(o.dataDir, "etcd"))
	if err != nil {
		return err
	}
	defer etcd.Close()

	tb := newProcessTB(logFile)
	defer tb.runCleanups()
	apiserver, err := startAPIServer(ctx, tb, o.dataDir, etcd.clientURL, o.cluster, net.ParseIP(o.advertise))
	if err != nil {
		return err
	}
	defer apiserver.TearDownFn()

	if err := writeKubeconfig(o.kubeconfig, apiserver.ClientConfig); err != nil {
		return err
	}
	if o.crdDir != "" {
		if err := applyCRDs(ctx, apiserver.ClientConfig, o.crdDir); err != nil {
			return err
		}
	}

	if o.namespaces != "" {
		if err := ensureNamespaces(ctx, apiserver.ClientConfig, strings.Split(o.namespaces, ",")); err != nil {
			return err
		}
	}

	kcmDone := make(chan error, 1)
	kcmCtx, stopKCM := context.WithCancel(ctx)
	defer stopKCM()
	if !o.noControllers {
		var kcmArgs []string
		if o.cluster {
			// The token controller fills the Secrets of type
			// kubernetes.io/service-account-token a user makes, signed
			// with the apiserver's key (clusterapiserver.go).
			// The root CA publisher writes the serving certificate's CA
			// as kube-root-ca.crt, so a pod's token volume holds the CA
			// its in-cluster client checks the apiserver with.
			kcmArgs = append(kcmArgs,
				"--service-account-private-key-file="+filepath.Join(o.dataDir, serviceAccountKeyFile),
				"--root-ca-file="+servingCAFile(o.dataDir))
		}
		if err := startControllerManager(kcmCtx, o.kubeconfig, strings.Split(o.controllers, ","), o.kcmQPS, o.kcmBurst, kcmArgs, kcmDone); err != nil {
			return err
		}
	}

	schedDone := make(chan error, 1)
	if o.cluster {
		if err := startScheduler(kcmCtx, o.kubeconfig, schedDone); err != nil {
			return err
		}
	}

	fmt.Printf("ready kubeconfig=%s server=%s startup=%s\n", o.kubeconfig, apiserver.ClientConfig.Host, time.Since(started).Round(10*time.Millisecond))

	select {
	case <-ctx.Done():
	case err := <-kcmDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("kube-controller-manager stopped: %w", err)
		}
	case err := <-schedDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("kube-scheduler stopped: %w", err)
		}
	}
	fmt.Println("stopping")
	stopKCM()
	return nil
}

// quietKlog undoes the verbosity that k8s.io/kubernetes' test utilities set
// when imported (-v=5) and sends component logs to a file, so the terminal
// shows only what this command itself says.
func quietKlog(logFile *os.File, verbosity string) error {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"v": verbosity, "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("set klog flag %s: %w", name, err)
		}
	}
	klog.SetOutput(logFile)
	return nil
}
