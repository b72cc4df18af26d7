package framework

import (
	"testing"

	"github.com/cadence-storage/longhorn-manager/app"
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
