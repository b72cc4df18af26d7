package app

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/api"
	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DaemonCmd is `longhorn-manager daemon`.
func DaemonCmd() cli.Command {
	hostname, _ := os.Hostname()
	return cli.Command{
		Name:  "daemon",
		Usage: "run the manager: controllers, this node's registration and the API",
		Flags: []cli.Flag{
			cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; the in-cluster config when empty", EnvVar: "KUBECONFIG"},
			cli.StringFlag{Name: "namespace", Value: "longhorn-system", Usage: "namespace of the Longhorn objects", EnvVar: "POD_NAMESPACE"},
			cli.StringFlag{Name: "node-name", Value: hostname, Usage: "this node's name", EnvVar: "NODE_NAME"},
			cli.StringFlag{Name: "data-dir", Value: "/var/lib/longhorn", Usage: "folder of this node's default disk"},
			cli.StringFlag{Name: "api-address", Value: "127.0.0.1:9500", Usage: "host:port the API listens on (the DaemonSet uses the pod IP)"},
			cli.BoolFlag{Name: "api-tls", Usage: "serve the API over TLS with this manager's certificate of the cluster's internal CA; callers check it with the CA's certificates in the ConfigMap " + mtls.CAConfigMapName + " (CronJob pods mount it when --manager-url is https://)", EnvVar: "API_TLS"},
			cli.StringFlag{Name: "api-auth", Value: api.AuthNone, Usage: "who may call the API: \"none\" (anyone who reaches it, as Longhorn) or \"kubernetes\" (a bearer token checked with TokenReview, each request with SubjectAccessReview on the longhorn.io resource and verb it touches)", EnvVar: "API_AUTH"},
			cli.StringFlag{Name: "api-token-audience", Usage: "with --api-auth=kubernetes, the one token audience the API accepts: callers send ServiceAccount tokens projected with it (no credential at the apiserver) and a pod's default token is refused; the recurring-job pods get such a token; empty: the apiserver's own tokens", EnvVar: "API_TOKEN_AUDIENCE"},
			cli.StringFlag{Name: "api-token-file", Usage: "the token the manager sends to its own API (its recurring-job runner) under --api-auth=kubernetes, a projected token of --api-token-audience; the kubeconfig's when empty", EnvVar: "API_TOKEN_FILE"},
			cli.StringSliceFlag{Name: "api-allowed-hosts", Usage: "host names the API answers to besides IP addresses, localhost and the host of --manager-url (against DNS rebinding; \"*.example.com\" for subdomains, \"*\" for any); repeat or separate with commas", EnvVar: "API_ALLOWED_HOSTS"},
			cli.StringFlag{Name: "metrics-address", Usage: "host:port where /metrics is served alone, for a NetworkPolicy to open to the scraper without the API (the API serves /metrics too); off when empty", EnvVar: "METRICS_ADDRESS"},
			cli.StringFlag{Name: "profiler-address", Usage: "loopback host:port where Go's runtime profiles are served on /debug/pprof/ (heap, CPU, goroutines); off when empty"},
			cli.StringFlag{Name: "engine-address", Value: "127.0.0.1:9501", Usage: "host:port of this node's engine service (the DaemonSet uses the pod IP)"},
			cli.StringFlag{Name: "csi-state-dir", Value: nodestate.DefaultDir, Usage: "the CSI Node service's state directory on this node (its --state-dir): where trimFilesystem finds a volume's device"},
			cli.StringFlag{Name: "host-proc", Usage: "where the host's /proc is mounted when the manager runs in a container (/host/proc): trimFilesystem reads the host's mounts there and runs fstrim in its mount namespace; empty when the manager runs on the host"},
			cli.StringSliceFlag{Name: "backup-target-file-roots", Usage: "absolute folders file:// backup targets may lie in (an NFS share's mount point, say); repeat or separate with commas; empty, file:// targets are refused. Never on /proc, /sys or the like; symbolic links out of them are not followed", EnvVar: "BACKUP_TARGET_FILE_ROOTS"},
			cli.StringFlag{Name: "frontend-address", Value: "127.0.0.1", Usage: "host the volumes' NBD frontends listen on; NBD has no authentication, so the default keeps them off the pod network (kubectl port-forward reaches them)"},
			cli.StringFlag{Name: "replica-address", Value: "127.0.0.1:0", Usage: "host:port where this node serves its replicas to the engines of other nodes (replica protocol, mutual TLS); in a cluster the node's address and a fixed port; port 0 takes a free one; empty serves none, and a volume then attaches only on the node of its replicas", EnvVar: "REPLICA_ADDRESS"},
			cli.StringSliceFlag{Name: "allowed-origins", Usage: "browser origins (scheme://host:port) whose pages may open the API's websocket streams besides the manager's own address and a UI behind a proxy that sets X-Forwarded-Host; needed for a UI reached by a public DNS name (see docs/api.md)", EnvVar: "ALLOWED_ORIGINS"},
			cli.StringSliceFlag{Name: "default-setting", Usage: "name=value: the value a setting is created with at the first start, in place of its default (repeat for more); a setting that exists keeps its value", EnvVar: "DEFAULT_SETTINGS"},
			cli.IntFlag{Name: "workers", Value: 2, Usage: "workers per controller (five times as many for volumes, snapshots and recurring jobs)"},
			cli.Float64Flag{Name: "kube-api-qps", Value: DefaultKubeAPIQPS, Usage: "requests per second to the Kubernetes API, on average"},
			cli.DurationFlag{Name: "startup-retry-timeout", Value: DefaultStartupRetryTimeout, Usage: "how long the daemon retries, at start, what a starting or restarting Kubernetes API refuses for now (a CRD's kind its admission does not know yet, 429, 503, timeouts, connection refused) before it stops saying what kept failing"},
			cli.IntFlag{Name: "kube-api-burst", Value: DefaultKubeAPIBurst, Usage: "requests to the Kubernetes API in a burst"},
			cli.StringFlag{Name: "manager-image", Value: "longhorn-manager:dev", Usage: "image of the pods that run recurring jobs and the backing image servers; with --pod-name and not given, that pod's own", EnvVar: "MANAGER_IMAGE"},
			cli.StringFlag{Name: "pod-name", Usage: "this manager's own pod, in --namespace: unless --manager-image is given, the pods it starts run the image of its longhorn-manager container", EnvVar: "POD_NAME"},
			cli.StringFlag{Name: "backing-image-manager-image", Usage: "default backing image manager image: managers of another image are replaced by ones of it, which reuse their files (locally a label of the binary version that runs them); --manager-image when empty", EnvVar: "BACKING_IMAGE_MANAGER_IMAGE"},
			cli.StringFlag{Name: "service-account", Value: "longhorn-service-account", Usage: "the manager's service account, which the backing image server pods run as (and the recurring-job pods, unless --recurring-job-service-account)", EnvVar: "SERVICE_ACCOUNT"},
			cli.StringFlag{Name: "recurring-job-service-account", Usage: "service account of the pods that run recurring jobs (package/rbac.yaml's longhorn-recurring-job may do only what they need); --service-account when empty", EnvVar: "RECURRING_JOB_SERVICE_ACCOUNT"},
			cli.StringFlag{Name: "manager-url", Value: "http://longhorn-backend:9500/v1", Usage: "manager API URL the recurring-job pods call"},
			cli.BoolFlag{Name: "recurring-job-skip-immediately", Usage: "skipImmediately for new recurring jobs that do not set it"},
			cli.StringFlag{Name: "backing-image-server-runner", Value: BackingImageServerRunnerProcess, Usage: "where the backing image data source and manager servers run: \"process\" (child processes of this binary on 127.0.0.1) or \"pod\" (pods of --manager-image on this node, with the disk mounted)"},
			cli.StringFlag{Name: "instance-manager-runner", Value: InstanceManagerInProcess, Usage: "where the node's engines and their NBD exports run: \"in-process\" (in this daemon: its restart stops every attached volume), \"process\" (an instance manager process of their own, started under <data-dir>/instance-manager or found running there, which outlives this daemon), \"external\" (an instance manager on <data-dir>/instance-manager that another starts: the daemon waits for it) or \"pod\" (a pod of --manager-image on this node, owned by the node's InstanceManager, made or adopted by this daemon: a rollout of the daemon's pods leaves it running)"},
			cli.StringFlag{Name: "recurring-job-runner", Value: "cronjob", Usage: "what fires recurring jobs: \"cronjob\" (a CronJob per job, a pod per run) or \"manager\" (the manager holding the runner Lease runs them itself)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("daemon takes no arguments, got %q", c.Args())
			}
			if r := c.String("recurring-job-runner"); r != string(longhorn.RecurringJobRunnerCronJob) && r != string(longhorn.RecurringJobRunnerManager) {
				return fmt.Errorf("--recurring-job-runner must be %q or %q, got %q", longhorn.RecurringJobRunnerCronJob, longhorn.RecurringJobRunnerManager, r)
			}
			if err := checkAPIAuth(c.String("api-auth")); err != nil {
				return err
			}
			if r := c.String("backing-image-server-runner"); r != BackingImageServerRunnerProcess && r != BackingImageServerRunnerPod {
				return backingImageServerRunnerError(r)
			}
			cfg, err := restConfig(c.String("kubeconfig"))
			if err != nil {
				return err
			}
			if c.Int("workers") < 1 {
				return fmt.Errorf("--workers must be at least 1, got %d", c.Int("workers"))
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			initial, err := datastore.ParseInitialSettings(splitList(c.StringSlice("default-setting")))
			if err != nil {
				return err
			}
			return RunDaemon(ctx, cfg, DaemonOptions{
				DefaultSettings:          initial,
				Namespace:                c.String("namespace"),
				NodeName:                 c.String("node-name"),
				DataDir:                  c.String("data-dir"),
				Version:                  c.App.Version,
				APIAddress:               c.String("api-address"),
				MetricsAddress:           c.String("metrics-address"),
				ProfilerAddress:          c.String("profiler-address"),
				APIAuth:                  c.String("api-auth"),
				APITLS:                   c.Bool("api-tls"),
				APITokenAudience:         c.String("api-token-audience"),
				APITokenFile:             c.String("api-token-file"),
				APIAllowedHosts:          splitList(c.StringSlice("api-allowed-hosts")),
				AllowedOrigins:           splitList(c.StringSlice("allowed-origins")),
				EngineAddress:            c.String("engine-address"),
				FrontendAddress:          c.String("frontend-address"),
				ReplicaAddress:           c.String("replica-address"),
				CSIStateDir:              c.String("csi-state-dir"),
				HostProc:                 c.String("host-proc"),
				BackupTargetFileRoots:    splitList(c.StringSlice("backup-target-file-roots")),
				ServiceAccount:           c.String("service-account"),
				ManagerImage:             managerImage(c),
				PodName:                  c.String("pod-name"),
				Workers:                  c.Int("workers"),
				KubeAPIQPS:               float32(c.Float64("kube-api-qps")),
				KubeAPIBurst:             c.Int("kube-api-burst"),
				StartupRetryTimeout:      c.Duration("startup-retry-timeout"),
				BackingImageManagerImage: c.String("backing-image-manager-image"),
				BackingImageServerRunner: c.String("backing-image-server-runner"),
				InstanceManagerRunner:    c.String("instance-manager-runner"),
				CronJob: jobcontroller.CronJobConfig{
					ManagerImage:           managerImage(c),
					ServiceAccount:         cmp.Or(c.String("recurring-job-service-account"), c.String("service-account")),
					ManagerURL:             c.String("manager-url"),
					SkipImmediatelyDefault: c.Bool("recurring-job-skip-immediately"),
					Runner:                 longhorn.RecurringJobRunner(c.String("recurring-job-runner")),
				},
			})
		},
	}
}

// restConfig loads a kubeconfig file, or the in-cluster config when path
// is empty.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig given and not running in a cluster: %v", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %v", path, err)
	}
	return cfg, nil
}

// splitList splits each value at commas and drops empty items.
func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}
