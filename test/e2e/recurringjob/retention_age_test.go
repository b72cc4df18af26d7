//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// Retention by age (Longhorn v1.12's retentionPolicy age-based and
// retainAge), through the API and on a real volume: bad input is refused
// naming the field and the rule; a snapshot job with retain 0 keeps what
// is younger than retainAge and deletes what grew older; with retain 2 it
// keeps the newest two however old; the API shows the policy as Longhorn
// does. (The ages are seconds long; the runs wait past them.)
func TestRecurringJobsRetainByAge(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)

	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"aged","task":"snapshot","cron":"@hourly","retain":0,"retentionPolicy":"age-based"}`).
		Expect(t, 400, "spec.retainAge: Required value")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"aged","task":"snapshot","cron":"@hourly","retain":0,"retentionPolicy":"age-based","retainAge":"3 days"}`).
		Expect(t, 400, "retainAge", "Go duration")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"aged","task":"snapshot-delete","cron":"@hourly","retain":1,"retentionPolicy":"age-based","retainAge":"1h"}`).
		Expect(t, 400, "spec.retentionPolicy", "applies to the snapshot and backup tasks")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"aged","task":"snapshot","cron":"@hourly","retain":0,"retentionPolicy":"by-size","retainAge":"1h"}`).
		Expect(t, 400, "spec.retentionPolicy: Unsupported value")
	job := e.Call(t, "POST", "/v1/recurringjobs", `{"name":"aged","task":"snapshot","cron":"@hourly","retain":0,"retentionPolicy":"age-based","retainAge":"4s"}`).Expect(t, 200)
	if job.Body["retentionPolicy"] != "age-based" || job.Body["retainAge"] != "4s" {
		t.Errorf("the API shows retentionPolicy %v retainAge %v", job.Body["retentionPolicy"], job.Body["retainAge"])
	}
	plain := e.Call(t, "POST", "/v1/recurringjobs", `{"name":"counted","task":"snapshot","cron":"@hourly","retain":2}`).Expect(t, 200)
	if plain.Body["retentionPolicy"] != "count-based" || plain.Body["retainAge"] != "0s" {
		t.Errorf("a job with no policy shows retentionPolicy %v retainAge %v, as Longhorn count-based and 0s", plain.Body["retentionPolicy"], plain.Body["retainAge"])
	}
	framework.Eventually(t, 10*time.Second, "jobs cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/aged", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"aged","isGroup":false}]}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })

	run := func(tick string) {
		t.Helper()
		if out := e.RunJob(t, kubeconfig, "aged", tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run %s: %s", tick, out)
		}
	}
	run("2026-11-22T01:00:00Z")
	run("2026-11-22T02:00:00Z")
	if n := e.JobSnapshots(t, "vol", "aged"); n != 2 {
		t.Fatalf("two runs within the age keep %d snapshots, want both", n)
	}
	time.Sleep(5 * time.Second)
	run("2026-11-22T03:00:00Z")
	if n := e.JobSnapshots(t, "vol", "aged"); n != 1 {
		t.Fatalf("after the first two grew older than retainAge, %d snapshots are kept, want the new one alone", n)
	}

	// retain 2 keeps the newest two whatever their age.
	e.Call(t, "PUT", "/v1/recurringjobs/aged", `{"retain":2}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "retain 2 cached", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/recurringjobs/aged", "").Raw, `"retain":2`), nil
	})
	run("2026-11-22T04:00:00Z")
	time.Sleep(5 * time.Second)
	run("2026-11-22T05:00:00Z")
	if n := e.JobSnapshots(t, "vol", "aged"); n != 2 {
		t.Fatalf("with retain 2, %d snapshots are kept, want the newest two though one is old", n)
	}
}

// The CRD checks retainAge's form as kubectl applies it, and takes
// Longhorn's own manifests (retainAge "0s" on a count-based job, as
// Longhorn's webhook writes it).
func TestTheCRDChecksRetainAge(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	lh := framework.LHClient(t, cluster.Config)
	job := func(name, age string, policy longhorn.RecurringJobRetentionPolicy) *longhorn.RecurringJob {
		d, _ := time.ParseDuration(age)
		return &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: longhorn.RecurringJobSpec{
			Task: longhorn.RecurringJobTypeBackup, Cron: "@daily", Retain: 1, RetentionPolicy: policy, RetainAge: &metav1.Duration{Duration: d}}}
	}
	ctx := context.Background()
	if _, err := lh.LonghornV1beta2().RecurringJobs(ns).Create(ctx, job("longhorns", "0s", longhorn.RecurringJobRetentionPolicyCountBased), metav1.CreateOptions{}); err != nil {
		t.Errorf("Longhorn's count-based job with retainAge 0s: %v", err)
	}
	if _, err := lh.LonghornV1beta2().RecurringJobs(ns).Create(ctx, job("aged", "72h", longhorn.RecurringJobRetentionPolicyAgeBased), metav1.CreateOptions{}); err != nil {
		t.Errorf("an age-based job of 72h: %v", err)
	}
	bad := job("bad", "1h", "by-size")
	if _, err := lh.LonghornV1beta2().RecurringJobs(ns).Create(ctx, bad, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.retentionPolicy") {
		t.Errorf("an unknown policy: %v", err)
	}
	out, err := cluster.TryKubectl(`apiVersion: longhorn.io/v1beta2
kind: RecurringJob
metadata:
  name: days
  namespace: `+ns+`
spec:
  task: backup
  cron: "@daily"
  retain: 1
  retentionPolicy: age-based
  retainAge: 3d
`, "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "retainAge must be a Go duration") {
		t.Errorf("retainAge 3d applied: %s %v", out, err)
	}
}
