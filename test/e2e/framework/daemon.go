package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/app"
	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/internal/testtime"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestCronJobConfig is the CronJob runner's configuration of every daemon a
// test starts: a manager image no kubelet pulls, the package's service
// account and the in-cluster API address.
var TestCronJobConfig = jobcontroller.CronJobConfig{
	ManagerImage:   "longhorn-manager:test",
	ServiceAccount: ServiceAccount,
	ManagerURL:     "http://longhorn-backend:9500/v1",
}

// TestBackupTargetFileRoots are the folders file:// backup targets may lie
// in on every daemon a test starts: the temporary folder, where
// t.TempDir() makes them.
var TestBackupTargetFileRoots = []string{os.TempDir()}

// RunningDaemon is a daemon started by a test, stopped by its cleanup.
type RunningDaemon struct {
	APIAddress string
	// InstanceManagerDir is the folder of the instance manager its
	// engines run in ("" when they run in the daemon): the CSI Node
	// service has the volumes' devices made there too (ServeCSI).
	InstanceManagerDir string
	cancel             context.CancelFunc
	done               chan error
	stopped            bool
}

func (d *RunningDaemon) Stop(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	d.stopped = true
	d.cancel()
	select {
	case err := <-d.done:
		if err != nil {
			t.Fatalf("daemon returned an error on stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop within 30s")
	}
	return time.Since(start)
}

// StartDaemon runs the daemon in this process with cfg and waits until it
// is ready.
func StartDaemon(t testing.TB, cfg *rest.Config, namespace, node, dataDir string, opts ...func(*app.DaemonOptions)) *RunningDaemon {
	t.Helper()
	d, err := LaunchDaemon(t, cfg, namespace, node, dataDir, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDefaultSettings are the values the tests' daemons create settings
// with (DaemonOptions.DefaultSettings), as --default-setting pairs give.
func TestDefaultSettings() map[types.SettingName]string {
	return map[types.SettingName]string{
		types.SettingNameReplicaSoftAntiAffinity:           "true",
		types.SettingNameStorageMinimalAvailablePercentage: "0",
	}
}

// dataDirNodes records which node's daemon uses each data directory: on
// a real cluster every node has its own disks, so two test daemons of
// different nodes never share one (a replica path that exists on one
// node's disk must not exist on the other's).
var dataDirNodes sync.Map

// LaunchDaemon is startDaemon without failing the test, for goroutines.
// The daemon stops when the test ends.
func LaunchDaemon(t testing.TB, cfg *rest.Config, namespace, node, dataDir string, opts ...func(*app.DaemonOptions)) (*RunningDaemon, error) {
	if dataDir == "" {
		return nil, fmt.Errorf("daemon %s: no data directory", node)
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	if prev, loaded := dataDirNodes.LoadOrStore(abs, namespace+"/"+node); loaded && prev != namespace+"/"+node {
		return nil, fmt.Errorf("daemon %s: data directory %s is %s's; every node's daemon needs its own", node, abs, prev)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	d := &RunningDaemon{cancel: cancel, done: make(chan error, 1)}
	o := app.DaemonOptions{
		Namespace:  namespace,
		NodeName:   node,
		DataDir:    dataDir,
		APIAddress: "127.0.0.1:0",
		// As the command's default: each node serves its replicas to
		// the others' engines on a free loopback port.
		ReplicaAddress: "127.0.0.1:0",
		CronJob:        TestCronJobConfig,
		// The tests' file:// targets are folders of t.TempDir(). Every
		// daemon of the test process gives the same roots: they are the
		// process's (backupstore.ConfineFileTargets).
		BackupTargetFileRoots: TestBackupTargetFileRoots,
		// Most tests run one node, whose volumes of two or three
		// replicas keep them all there, as make run's one node does; a
		// test of placement sets the setting itself. The tests' disks
		// are folders of the machine's own disk, whatever its free space.
		DefaultSettings: TestDefaultSettings(),
	}
	o.Hooks.OnReady = func(addr string) { ready <- addr }
	if os.Getenv(InstanceManagerEnv) == app.InstanceManagerProcess {
		opts = append([]func(*app.DaemonOptions){InstanceManagerProcess(t)}, opts...)
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.InstanceManagerRunner == app.InstanceManagerProcess || o.InstanceManagerRunner == app.InstanceManagerExternal {
		d.InstanceManagerDir = filepath.Join(o.DataDir, "instance-manager")
	}
	go func() { d.done <- app.RunDaemon(ctx, cfg, o) }()
	select {
	case d.APIAddress = <-ready:
	case err := <-d.done:
		cancel()
		return nil, fmt.Errorf("daemon %s stopped before it was ready: %v", node, err)
	case <-time.After(60 * time.Second):
		cancel()
		return nil, fmt.Errorf("daemon %s not ready within 60s", node)
	}
	t.Cleanup(func() {
		if !d.stopped {
			cancel()
			<-d.done
		}
	})
	return d, nil
}

func LHClient(t testing.TB, cfg *rest.Config) lhclientset.Interface {
	t.Helper()
	c, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Eventually polls cond every 100ms for up to timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, testtime.Scale(timeout), true, func(context.Context) (bool, error) {
		return cond()
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// EnvRunServer makes the test binary a backing image server, so the
// daemons the tests start can run their servers as child processes of
// this binary, as a real daemon runs them of its own.
const EnvRunServer = "LONGHORN_MANAGER_TEST_RUN_BACKING_IMAGE_SERVER"

// WithTestServers runs the daemon's backing image servers from this test binary.
func WithTestServers(o *app.DaemonOptions) {
	o.Hooks.BackingImageServerCommand = []string{os.Args[0]}
	o.Hooks.BackingImageServerEnv = []string{EnvRunServer + "=1"}
}
