// Package testcluster starts the project's real local control plane (etcd,
// kube-apiserver and the garbage-collector, namespace, Job, CronJob and
// PersistentVolume controllers, from bin/controlplane) for integration tests, installs the
// Longhorn CRDs, and hands out admin and service-account configs and a
// fresh namespace per test.
//
// A test package uses it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
//
// and a test calls testcluster.Get(t). Set LONGHORN_TEST_KUBECONFIG to run
// against a control plane that is already running instead.
package testcluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
)

// EnvKubeconfig names a kubeconfig of a running control plane to reuse.
const EnvKubeconfig = "LONGHORN_TEST_KUBECONFIG"

// EnvControllerManagerQPS, when set, is the kube-controller-manager's
// client-side request rate in the control planes the tests start (its
// burst twice that): a benchmark of what the PersistentVolume binder
// hands over measures with it raised, as a cluster may set it. Unset, the
// controller manager keeps its defaults (20 a second, burst 30).
const EnvControllerManagerQPS = "LONGHORN_TEST_CONTROLLER_MANAGER_QPS"

// Cluster is one running control plane.
type Cluster struct {
	// Config is an admin client config.
	Config *rest.Config
	// Kubeconfig is the path of the admin kubeconfig file.
	Kubeconfig string
	// DataDir holds the control plane's etcd data and logs; empty when the
	// cluster was not started here.
	DataDir string

	cmd  *exec.Cmd
	done chan error
}

// Options configure Start.
type Options struct {
	// DataDir keeps etcd data; a restart with the same folder sees the
	// same objects.
	DataDir string
	// Log receives the control plane's own output; discarded when nil.
	Log io.Writer
	// AsRunStartsIt returns as soon as bin/controlplane says ready and
	// the admission policies are written, as scripts/run.sh starts it,
	// without waiting for the apiserver to apply them: for some seconds
	// its admission refuses creates of the kinds they match (503, "Resource
	// kind ... not found"). Tests of what a manager meets right after a
	// (re)start set it; others want the warm control plane.
	AsRunStartsIt bool
	// Bin is the control plane's binary; default the repository's
	// bin/controlplane.
	Bin string
	// Controllers replace the kube-controller-manager controllers it
	// runs (default Controllers).
	Controllers []string
	// ExtraArgs are added to its command line (--cluster, for the real
	// node's cluster of test/e2e/cluster).
	ExtraArgs []string
}

// Controllers are the kube-controller-manager controllers a test control
// plane runs: bin/controlplane's own (garbage collector, namespace, Job,
// CronJob) and the PersistentVolume controllers that a CSI driver's
// external-provisioner relies on: the binder, which hands a claim to its
// StorageClass's provisioner and binds the volume made for it, and the
// claim and volume protection controllers, which lift the finalizers the
// apiserver's StorageObjectInUseProtection admission puts on them. The
// attach/detach controller is not among them: with no kubelet it would
// detach every volume, and tests make VolumeAttachments themselves.
var Controllers = []string{
	"garbagecollector", "namespace", "job", "cronjob",
	"persistentvolume-binder-controller", "persistentvolumeclaim-protection-controller", "persistentvolume-protection-controller",
}

// startTimeout bounds how long a control plane may take to become ready.
const startTimeout = 2 * time.Minute

// Start runs bin/controlplane with the repository's CRDs and waits until
// it is ready.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := o.Bin
	if bin == "" {
		bin = filepath.Join(root, "bin", "controlplane")
	}
	controllers := o.Controllers
	if len(controllers) == 0 {
		controllers = Controllers
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s is missing: run `make test` or scripts/build-controlplane.sh to build it", bin)
	}
	kubeconfig := filepath.Join(o.DataDir, "kubeconfig")
	args := []string{
		"--data-dir", o.DataDir,
		"--kubeconfig", kubeconfig,
		"--crd-dir", filepath.Join(root, "k8s", "crds"),
		"--controllers", strings.Join(controllers, ","),
	}
	args = append(args, o.ExtraArgs...)
	if v := os.Getenv(EnvControllerManagerQPS); v != "" {
		qps, err := strconv.Atoi(v)
		if err != nil || qps <= 0 {
			return nil, fmt.Errorf("%s=%q: a positive whole number of requests a second", EnvControllerManagerQPS, v)
		}
		args = append(args, "--controller-manager-qps", strconv.Itoa(qps), "--controller-manager-burst", strconv.Itoa(2*qps))
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// The last lines of output go into start-up errors, so a failing
	// control plane explains itself in the test log.
	tail := &lineTail{max: 5}
	logOut := io.Writer(tail)
	if o.Log != nil {
		logOut = io.MultiWriter(o.Log, tail)
	}
	cmd.Stderr = logOut
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	c := &Cluster{Kubeconfig: kubeconfig, DataDir: o.DataDir, cmd: cmd, done: make(chan error, 1)}

	ready := make(chan struct{})
	go func() {
		scanner := bufio.NewScanner(stdout)
		signalled := false
		for scanner.Scan() {
			line := scanner.Text()
			fmt.Fprintln(logOut, line)
			if !signalled && strings.HasPrefix(line, "ready ") {
				signalled = true
				close(ready)
			}
		}
		c.done <- cmd.Wait()
	}()

	select {
	case <-ready:
	case err := <-c.done:
		return nil, fmt.Errorf("control plane exited before it was ready: %v; its last output:\n%s", err, tail)
	case <-time.After(startTimeout):
		_ = c.Stop()
		return nil, fmt.Errorf("control plane not ready within %s (logs in %s)", startTimeout, o.DataDir)
	case <-ctx.Done():
		_ = c.Stop()
		return nil, ctx.Err()
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		_ = c.Stop()
		return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
	}
	// bin/controlplane applies the CRDs; the admission policies go here.
	if err := crds.InstallPolicies(ctx, c.Config); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if o.AsRunStartsIt {
		return c, nil
	}
	if err := waitForMutatingPolicies(ctx, c.Config, startTimeout); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// Connect uses a running control plane and installs the CRDs in it.
func Connect(ctx context.Context, kubeconfig string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %w", EnvKubeconfig, kubeconfig, err)
	}
	if err := crds.Install(ctx, cfg); err != nil {
		return nil, err
	}
	return &Cluster{Config: cfg, Kubeconfig: kubeconfig}, nil
}

// CPUSeconds is the processor time the control plane (etcd, the
// apiserver and the controllers, one process) has used so far, user and
// system, for benchmarks to say what the apiserver spent. It is 0 for a
// reused cluster.
func (c *Cluster) CPUSeconds() float64 {
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: utime and stime are the 12th and 13th of them, in
	// clock ticks (100 a second on Linux).
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}

// Stop sends SIGTERM and waits for a clean exit, killing the process if it
// takes longer than 30 seconds. It does nothing for a reused cluster.
func (c *Cluster) Stop() error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		c.cmd = nil
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return fmt.Errorf("control plane exited with %v", err)
		}
		return err
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		c.cmd = nil
		return errors.New("control plane did not stop within 30s and was killed")
	}
}

// RepoRoot finds the repository root: the nearest folder upwards from the
// working directory whose go.mod declares the manager's module.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/cadence-storage/longhorn-manager\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (the go.mod of github.com/cadence-storage/longhorn-manager) above the working directory")
		}
		dir = parent
	}
}

// lineTail keeps the last lines written to it.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func (l *lineTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		l.lines = append(l.lines, line)
		if len(l.lines) > l.max {
			l.lines = l.lines[1:]
		}
	}
	return len(p), nil
}

func (l *lineTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}
