//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/managerrunner"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestManagerRunnerRunsAnEveryMinuteJobOnceWithTwoManagers(t *testing.T) {
	t.Parallel()
	e, _ := framework.NewRunnerEnv(t)
	// A second manager competes for the runner Lease: still one run a tick.
	framework.StartDaemon(t, e.Cfg, e.NS, "node-2", t.TempDir(), framework.ManagerRunner)
	// Suspended until its volume is attached: a tick before would run
	// with no volume. A tick that passes meanwhile is caught up at the
	// resume, so the first run is still for the first tick after creation.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"minutely","task":"snapshot","cron":"* * * * *","retain":3,"suspend":true}`).Expect(t, 200)
	e.AttachedVolume(t, "vol", "minutely")
	e.Call(t, "PUT", "/v1/recurringjobs/minutely", `{"suspend":false}`).Expect(t, 200)
	created := e.Job(t, "minutely").CreationTimestamp.Time

	job := e.WaitJob(t, "minutely", "a run recorded and finished", 100*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	tick := job.Status.LastScheduleTime.Time
	// The first run is at the first tick after creation, never at creation.
	if first := created.Truncate(time.Minute).Add(time.Minute); !tick.Equal(first) && !tick.Equal(first.Add(time.Minute)) {
		t.Fatalf("first run for %s, created at %s", tick, created)
	}
	if job.Status.ExecutionCount < 1 || job.Status.NextScheduleTime == nil || !job.Status.NextScheduleTime.After(tick) {
		t.Fatalf("status after a run: %+v", job.Status)
	}
	if n := e.TickSnapshots(t, "vol", tick); n != 1 {
		t.Fatalf("%d snapshots for tick %s, want 1", n, tick)
	}
	// No CronJob exists for a job of the manager runner.
	if cjs, err := e.Kube.BatchV1().CronJobs(e.NS).List(context.Background(), metav1.ListOptions{}); err != nil || len(cjs.Items) != 0 {
		t.Fatalf("CronJobs with the manager runner: %v %v", cjs, err)
	}
	lease, err := e.Kube.CoordinationV1().Leases(e.NS).Get(context.Background(), managerrunner.Lease, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, "node-") {
		t.Fatalf("runner Lease: %+v %v", lease, err)
	}
	// The next tick runs too, once, and is counted.
	next := job.Status.NextScheduleTime.Time
	job = e.WaitJob(t, "minutely", "the next tick run", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && !j.Status.LastScheduleTime.Time.Before(next) && len(j.Status.Active) == 0
	})
	if job.Status.ExecutionCount != 2 {
		t.Errorf("executionCount %d after two ticks", job.Status.ExecutionCount)
	}
	if n := e.TickSnapshots(t, "vol", next); n != 1 {
		t.Errorf("%d snapshots for tick %s, want 1", n, next)
	}
}

// An @every job ticks at its creation plus whole intervals, to the
// second: the catch-up run after a suspension is for such a tick (robfig's
// relative @every made it "an interval before now"), and nextScheduleTime
// is the tick after it on the same grid.
func TestManagerRunnerCountsEveryFromCreation(t *testing.T) {
	t.Parallel()
	e, _ := framework.NewRunnerEnv(t)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"interval","task":"snapshot","cron":"@every 1m","retain":3,"suspend":true}`).Expect(t, 200)
	e.AttachedVolume(t, "vol", "interval")
	created := e.Job(t, "interval").CreationTimestamp.Time
	// The tick of creation + 1m passes while suspended, then the job
	// resumes between two ticks.
	time.Sleep(time.Until(created.Add(75 * time.Second)))
	e.Call(t, "PUT", "/v1/recurringjobs/interval", `{"suspend":false,"skipImmediately":false}`).Expect(t, 200)
	job := e.WaitJob(t, "interval", "the catch-up run", 30*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	tick := job.Status.LastScheduleTime.Time
	if d := tick.Sub(created); d <= 0 || d%time.Minute != 0 {
		t.Fatalf("ran the tick %s, %s after the creation at %s: not whole minutes", tick.UTC(), d, created.UTC())
	}
	if next := job.Status.NextScheduleTime; next == nil || !next.After(tick) || next.Sub(created)%time.Minute != 0 {
		t.Fatalf("nextScheduleTime %v after the tick %s of a job created at %s", next, tick.UTC(), created.UTC())
	}
	if n := e.TickSnapshots(t, "vol", tick); n != 1 {
		t.Fatalf("%d snapshots for tick %s, want 1", n, tick)
	}
}

func TestManagerRunnerSuspendAndResumeWithSkip(t *testing.T) {
	t.Parallel()
	e, _ := framework.NewRunnerEnv(t)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"paused","task":"snapshot","cron":"* * * * *","retain":1,"suspend":true}`).Expect(t, 200)
	created := e.Job(t, "paused").CreationTimestamp.Time
	// A tick passes while suspended: no run, and no next tick shown.
	time.Sleep(time.Until(created.Truncate(time.Minute).Add(time.Minute + 3*time.Second)))
	job := e.Job(t, "paused")
	if job.Status.LastScheduleTime != nil || job.Status.ExecutionCount != 0 || job.Status.NextScheduleTime != nil {
		t.Fatalf("a suspended job ran or shows a next tick: %+v", job.Status)
	}

	// Resume with skipImmediately: the tick due now is skipped; the
	// field is left as written.
	e.Call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":false,"skipImmediately":true}`).Expect(t, 200)
	job = e.WaitJob(t, "paused", "skip recorded", 15*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastSkipped != nil && j.Status.ObservedSuspend != nil && !*j.Status.ObservedSuspend
	})
	if job.Spec.SkipImmediately == nil || !*job.Spec.SkipImmediately {
		t.Fatalf("spec.skipImmediately written back: %v", job.Spec.SkipImmediately)
	}
	skipped := job.Status.LastSkipped.Time
	if job.Status.ExecutionCount != 0 {
		t.Fatalf("the skipped tick ran: %+v", job.Status)
	}
	// The next run is the next tick after the skip.
	job = e.WaitJob(t, "paused", "the run after the skip", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && len(j.Status.Active) == 0
	})
	if want := skipped.Truncate(time.Minute).Add(time.Minute); !job.Status.LastScheduleTime.Time.Equal(want) || job.Status.ExecutionCount != 1 {
		t.Fatalf("run after skip at %s for tick %s (count %d), want tick %s", skipped, job.Status.LastScheduleTime, job.Status.ExecutionCount, want)
	}

	// Suspended again, and resumed without skip: the tick missed while
	// suspended runs once, at once.
	e.Call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":true}`).Expect(t, 200)
	last := job.Status.LastScheduleTime.Time
	time.Sleep(time.Until(last.Add(time.Minute + 3*time.Second)))
	if j := e.Job(t, "paused"); j.Status.ExecutionCount != 1 {
		t.Fatalf("ran while suspended: %+v", j.Status)
	}
	e.Call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":false,"skipImmediately":false}`).Expect(t, 200)
	job = e.WaitJob(t, "paused", "catch-up run after resume", 15*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.ExecutionCount == 2 && len(j.Status.Active) == 0
	})
	if !job.Status.LastScheduleTime.Time.After(last) {
		t.Fatalf("catch-up run for %s, after %s", job.Status.LastScheduleTime, last)
	}
}

func TestManagerRunnerRestartMidRunNeitherLosesNorDoublesATick(t *testing.T) {
	t.Parallel()
	var once sync.Once
	held := make(chan struct{})
	hold := func(o *app.DaemonOptions) {
		o.Hooks.RecurringJobBeforeVolume = func(ctx context.Context, job, volume string) {
			if volume == "vol-c" {
				once.Do(func() { close(held) })
				<-ctx.Done() // the manager stops in the middle of the run
			}
		}
	}
	dataDir := t.TempDir()
	e, first := framework.NewRunnerEnv(t, hold, func(o *app.DaemonOptions) { o.DataDir = dataDir })
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"slow","task":"snapshot","cron":"* * * * *","retain":5,"concurrency":1}`).Expect(t, 200)
	volumes := []string{"vol-a", "vol-b", "vol-c", "vol-d"}
	for _, v := range volumes {
		e.AttachedVolume(t, v, "slow")
	}
	select {
	case <-held:
	case <-time.After(100 * time.Second):
		t.Fatal("the run did not reach vol-c")
	}
	job := e.Job(t, "slow")
	if len(job.Status.Active) != 1 {
		t.Fatalf("status.active during the run: %+v", job.Status.Active)
	}
	tick := job.Status.Active[0].ScheduledTime.Time
	// Earlier ticks may have run before every volume was labelled.
	count := job.Status.ExecutionCount
	if e.TickSnapshots(t, "vol-a", tick) != 1 || e.TickSnapshots(t, "vol-c", tick) != 0 {
		t.Fatal("the run is not where the test holds it")
	}
	// Suspending leaves the running run alone: the restart finishes it.
	e.Call(t, "PUT", "/v1/recurringjobs/slow", `{"suspend":true}`).Expect(t, 200)

	first.Stop(t)
	second := framework.StartDaemon(t, e.Cfg, e.NS, "node-1", dataDir, framework.ManagerRunner)
	e.Base = "http://" + second.APIAddress
	job = e.WaitJob(t, "slow", "the interrupted run finished by the new manager", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return len(j.Status.Active) == 0 && j.Status.LastSuccessfulTime != nil
	})
	if !job.Status.LastScheduleTime.Time.Equal(tick) || job.Status.ExecutionCount != count {
		t.Fatalf("after the restart: %+v (tick %s)", job.Status, tick)
	}
	for _, v := range volumes {
		if n := e.TickSnapshots(t, v, tick); n != 1 {
			t.Errorf("%s has %d snapshots for tick %s, want 1", v, n, tick)
		}
	}
	if ev := e.Events(t, "slow", managerrunner.EventReasonRunResumed); len(ev) == 0 {
		t.Error("no RunResumed event")
	}
}

func TestDaemonRefusesAnUnknownRunner(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	_, err := framework.LaunchDaemon(t, cluster.Config, cluster.NewNamespace(t), "node-1", t.TempDir(), func(o *app.DaemonOptions) {
		o.CronJob.Runner = "kubelet"
	})
	if err == nil || !strings.Contains(err.Error(), "--recurring-job-runner") {
		t.Fatalf("got %v", err)
	}
}
