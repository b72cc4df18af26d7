package app

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
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
	installRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, serviceAccount)
	dataDir := t.TempDir()
	first := startDaemon(t, cfg, ns, "node-1", dataDir)
	e := &runnerEnv{
		apiEnv: &apiEnv{managerEnv: &managerEnv{cluster: cluster, ns: ns, kube: kube, lh: lhClient(t, cluster.Config)}, base: "http://" + first.apiAddress},
		cfg:    cfg,
	}
	// A schedule that does not fire during the test: the test is the pod.
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"snapshot","cron":"0 3 * * *","retain":2}`).expect(t, 200)
	for _, v := range []string{"vol-a", "vol-b"} {
		e.attachedVolume(t, v, "nightly")
	}
	tick := time.Now().UTC().Truncate(time.Minute)
	kubeconfig := serviceAccountKubeconfig(t, e.cluster, e.ns)

	first.stop(t)
	var out bytes.Buffer
	cmd := exec.Command(managerBinary(t), "recurring-job", "nightly", "--manager-url", e.base+"/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.ns, "--tick", tick.Format(time.RFC3339), "--retry-for", "2m")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The pod is retrying against the stopped manager; it comes back on
	// the same address.
	time.Sleep(2 * time.Second)
	startDaemon(t, cfg, ns, "node-1", dataDir, func(o *DaemonOptions) { o.APIAddress = strings.TrimPrefix(e.base, "http://") })
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
	if got := e.runJob(t, kubeconfig, "nightly", tick.Format(time.RFC3339)); !strings.Contains(got, "failed=0") {
		t.Fatalf("second run: %s", got)
	}
	for _, v := range []string{"vol-a", "vol-b"} {
		if n := e.tickSnapshots(t, v, tick); n != 1 {
			t.Errorf("%s has %d snapshots for tick %s, want 1", v, n, tick)
		}
	}
}
