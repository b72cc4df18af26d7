//go:build e2e

package recurringjob

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// On the CronJob runner the tick is fired by Kubernetes and run by a pod;
// a manager restart in the middle of the pod's run neither loses the tick
// (the pod retries the API until the manager is back) nor doubles it (the
// snapshot carries the tick, and a second run for it makes nothing).
func TestCronJobRunnerPodRunSurvivesAManagerRestart(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	dataDir := t.TempDir()
	first := framework.StartDaemon(t, cfg, ns, "node-1", dataDir)
	e := &framework.RunnerEnv{
		APIEnv: &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}, Base: "http://" + first.APIAddress},
		Cfg:    cfg,
	}
	// A schedule that does not fire during the test: the test is the pod.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"snapshot","cron":"0 3 * * *","retain":2}`).Expect(t, 200)
	for _, v := range []string{"vol-a", "vol-b"} {
		e.AttachedVolume(t, v, "nightly")
	}
	tick := time.Now().UTC().Truncate(time.Minute)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)

	first.Stop(t)
	var out bytes.Buffer
	cmd := exec.Command(framework.ManagerBinary(t), "recurring-job", "nightly", "--manager-url", e.Base+"/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.NS, "--tick", tick.Format(time.RFC3339), "--retry-for", "2m")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The pod is retrying against the stopped manager; it comes back on
	// the same address.
	time.Sleep(2 * time.Second)
	framework.StartDaemon(t, cfg, ns, "node-1", dataDir, func(o *app.DaemonOptions) { o.APIAddress = strings.TrimPrefix(e.Base, "http://") })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the run failed: %v\n%s", err, out.String())
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the run did not end\n%s", out.String())
	}
	if !strings.Contains(out.String(), "succeeded=2 failed=0") {
		t.Fatalf("run summary: %s", out.String())
	}
	// A second pod for the same tick (a retried Job) makes nothing twice.
	if got := e.RunJob(t, kubeconfig, "nightly", tick.Format(time.RFC3339)); !strings.Contains(got, "failed=0") {
		t.Fatalf("second run: %s", got)
	}
	for _, v := range []string{"vol-a", "vol-b"} {
		if n := e.TickSnapshots(t, v, tick); n != 1 {
			t.Errorf("%s has %d snapshots for tick %s, want 1", v, n, tick)
		}
	}
}
