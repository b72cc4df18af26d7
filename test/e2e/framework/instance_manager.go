package framework

import (
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager"
)

// InstanceManagerEnv, set to "process" in the environment, runs every
// daemon a test starts with its engines in an instance manager process
// (--instance-manager-runner=process) instead of in the daemon: the
// suites then prove the remote path as they prove the in-process one.
const InstanceManagerEnv = "LONGHORN_TEST_INSTANCE_MANAGER"

// InstanceManagerProcess runs the daemon's engines in an instance manager
// process of the built longhorn-manager, stopped when the test ends.
func InstanceManagerProcess(t testing.TB) func(*app.DaemonOptions) {
	bin := ManagerBinary(t)
	return func(o *app.DaemonOptions) {
		o.InstanceManagerRunner, o.InstanceManagerBinary = app.InstanceManagerProcess, bin
		dataDir := o.DataDir
		t.Cleanup(func() { StopInstanceManager(t, dataDir) })
	}
}

// RunInstanceManager starts the built longhorn-manager's instance
// manager on dir as a process of the test's own, as an operator would by
// hand, and returns its client once it answers; both stop when the test
// ends.
func RunInstanceManager(t testing.TB, dir string) *instancemanager.Client {
	t.Helper()
	cmd := exec.Command(ManagerBinary(t), "instance-manager", "--dir", dir)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	Eventually(t, 30*time.Second, "the instance manager's socket", func() (bool, error) {
		conn, err := net.Dial("unix", instancemanager.SocketPath(dir))
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	})
	c, err := instancemanager.Dial(instancemanager.SocketPath(dir), logrus.NewEntry(logrus.StandardLogger()), nil, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(c.Close)
	return c
}
