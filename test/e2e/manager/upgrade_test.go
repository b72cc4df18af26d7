//go:build e2e

package manager

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/upgrade/upgradetest"
)

// These tests are not parallel: the StorageClasses the migration lists are
// cluster-wide, and each fixture's class must meet only its own manager.

// oldStateEnv is a namespace holding the v1.1 fixture and the manager's
// RBAC with the upgrade's (rbac-upgrade-storageclasses.yaml, as an
// administrator applies it for this upgrade), not yet running a manager.
func oldStateEnv(t *testing.T) (*upgradetest.Fixture, *rest.Config, string, kubernetes.Interface, lhclientset.Interface) {
	t.Helper()
	return oldStateEnvWith(t, upgradeRBAC)
}

const upgradeRBAC = "components/upgrade-from-v1.1/rbac-upgrade-storageclasses.yaml"

func oldStateEnvWith(t *testing.T, rbacFiles ...string) (*upgradetest.Fixture, *rest.Config, string, kubernetes.Interface, lhclientset.Interface) {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	lh := framework.LHClient(t, cluster.Config)
	framework.InstallRBACIn(t, cluster, kube, ns, rbacFiles...)
	return upgradetest.Create(t, kube, lh, ns), cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, kube, lh
}

// Without the upgrade's StorageClass rights the upgrade still completes:
// the classes stay as they were (the CSI driver reads their recurringJobs
// parameter itself), everything else is migrated.
func TestDaemonUpgradesWithoutTheStorageClassRights(t *testing.T) {
	f, saConfig, _, _, _ := oldStateEnvWith(t)
	framework.StartDaemon(t, saConfig, f.Namespace, "node-1", t.TempDir())
	f.AssertMigratedLeavingStorageClass(t)
}

func TestDaemonMigratesOldRecurringJobsAtStart(t *testing.T) {
	f, saConfig, ns, kube, lh := oldStateEnv(t)
	dataDir := t.TempDir()

	d := framework.StartDaemon(t, saConfig, ns, "node-1", dataDir)
	f.AssertMigrated(t)
	// The controllers start on migrated data: every new job gets its CronJob.
	framework.Eventually(t, 15*time.Second, "a CronJob per migrated job", func() (bool, error) {
		jobs, err := lh.LonghornV1beta2().RecurringJobs(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, j := range jobs.Items {
			if _, err := kube.BatchV1().CronJobs(ns).Get(context.Background(), j.Name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return len(jobs.Items) == 4, nil
	})
	// Settled, not just owned: a volume's controller goes on after the
	// claim (finalizer, replica and engine, state), and what it had left
	// to do would show as a change on the second start.
	framework.Eventually(t, 20*time.Second, "volumes owned and settled", func() (bool, error) {
		vols, err := lh.LonghornV1beta2().Volumes(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, v := range vols.Items {
			if v.Status.OwnerID != "node-1" || v.Status.State != longhorn.VolumeStateDetached || len(v.Finalizers) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	// The volume controller goes on after taking ownership (replicas, the
	// detached state): stop only once nothing changes any more, so what a
	// second start writes is its own doing.
	var settled map[string]string
	framework.Eventually(t, 15*time.Second, "the objects settle", func() (bool, error) {
		v := f.Versions(t)
		same := reflect.DeepEqual(v, settled)
		settled = v
		time.Sleep(500 * time.Millisecond)
		return same, nil
	})
	d.Stop(t)
	before := f.Versions(t)

	framework.StartDaemon(t, saConfig, ns, "node-1", dataDir)
	time.Sleep(time.Second)
	if after := f.Versions(t); !reflect.DeepEqual(before, after) {
		t.Errorf("a second start changed objects:\nbefore %v\nafter  %v", before, after)
	}
}

func TestTwoDaemonsStartingAtOnceMigrateOnce(t *testing.T) {
	f, saConfig, ns, _, _ := oldStateEnv(t)

	var wg sync.WaitGroup
	for _, node := range []string{"node-1", "node-2"} {
		wg.Add(1)
		go func(node string) {
			defer wg.Done()
			if _, err := framework.LaunchDaemon(t, saConfig, ns, node, t.TempDir()); err != nil {
				t.Error(err)
			}
		}(node)
	}
	wg.Wait()
	f.AssertMigrated(t)
}

// Users upgrade by restarting `make run` (or the cluster) with v1.1's
// objects in place: the control plane comes back, and the daemon starts
// at once, while the apiserver's admission still refuses RecurringJob
// creates for some seconds ("Resource kind ... not found. There can be a
// delay ..."). The daemon waits that out, migrates, and is ready only
// once writes of every kind go through, so the API's first create right
// after ready succeeds; on the next restart too, with nothing left to
// migrate.
func TestDaemonStartsRightAfterAControlPlaneRestartOnOldData(t *testing.T) {
	testcluster.SkipIfShort(t, "a control plane of its own")
	dir := t.TempDir()
	var cp *testcluster.Cluster
	restart := func(asRunStartsIt bool) {
		t.Helper()
		if cp != nil {
			if err := cp.Stop(); err != nil {
				t.Fatal(err)
			}
		}
		var err error
		cp, err = testcluster.Start(context.Background(), testcluster.Options{DataDir: dir, AsRunStartsIt: asRunStartsIt})
		if err != nil {
			t.Fatal(err)
		}
		c := cp
		t.Cleanup(func() { _ = c.Stop() })
	}
	restart(false)
	kube := cp.KubeClient(t)
	ns := cp.NewNamespace(t)
	framework.InstallRBACIn(t, cp, kube, ns, upgradeRBAC)
	f := upgradetest.Create(t, kube, framework.LHClient(t, cp.Config), ns)
	dataDir := t.TempDir()

	createJob := func(d *framework.RunningDaemon, name string) {
		t.Helper()
		resp, err := http.Get("http://" + d.APIAddress + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz answered %d once ready", resp.StatusCode)
		}
		resp, err = http.Post("http://"+d.APIAddress+"/v1/recurringjobs", "application/json",
			strings.NewReader(`{"name":"`+name+`","task":"snapshot","cron":"@hourly","retain":1}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the first create through the API once ready answered %d %s", resp.StatusCode, body)
		}
	}

	restart(true)
	f.Reconnect(cp.KubeClient(t), framework.LHClient(t, cp.Config))
	d := framework.StartDaemon(t, cp.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", dataDir)
	f.AssertMigrated(t)
	createJob(d, "after-upgrade")
	d.Stop(t)

	// The next restart, on migrated data: the daemon is ready at once
	// unless it waits for the apiserver.
	restart(true)
	d = framework.StartDaemon(t, cp.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", dataDir)
	createJob(d, "after-restart")
}
