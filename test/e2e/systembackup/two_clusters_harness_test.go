//go:build e2e

package systembackup

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// secondCluster starts a control plane of the test's own, beside the
// package's, and a manager on it: a fresh cluster.
func secondCluster(t *testing.T) *framework.APIEnv {
	t.Helper()
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "controlplane.out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cp, err := testcluster.Start(context.Background(), testcluster.Options{DataDir: filepath.Join(dir, "cp"), Log: logFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube := cp.KubeClient(t)
	ns := cp.NewNamespace(t)
	framework.InstallRBACIn(t, cp, kube, ns)
	d := framework.StartDaemon(t, cp.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())
	return &framework.APIEnv{
		ManagerEnv: &framework.ManagerEnv{Cluster: cp, NS: ns, Kube: kube, LH: framework.LHClient(t, cp.Config)},
		Base:       "http://" + d.APIAddress,
	}
}
