package app

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/types"
)

// managerRunner makes a daemon fire recurring jobs itself.
func managerRunner(o *DaemonOptions) { o.CronJob.Runner = longhorn.RecurringJobRunnerManager }

// runnerEnv is a namespace with daemons using the manager runner.
type runnerEnv struct {
	*apiEnv
	cfg *rest.Config
}

func newRunnerEnv(t *testing.T, opts ...func(*DaemonOptions)) (*runnerEnv, *runningDaemon) {
	t.Helper()
	return newRunnerEnvIn(t, testcluster.Get(t).NewNamespace(t), opts...)
}

// newRunnerEnvIn is newRunnerEnv in a namespace the test made.
func newRunnerEnvIn(t *testing.T, ns string, opts ...func(*DaemonOptions)) (*runnerEnv, *runningDaemon) {
	t.Helper()
	cluster := testcluster.Get(t)
	kube := cluster.KubeClient(t)
	installRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, serviceAccount)
	d := startDaemon(t, cfg, ns, "node-1", t.TempDir(), append([]func(*DaemonOptions){managerRunner}, opts...)...)
	return &runnerEnv{
		apiEnv: &apiEnv{managerEnv: &managerEnv{cluster: cluster, ns: ns, kube: kube, lh: lhClient(t, cluster.Config)}, base: "http://" + d.apiAddress},
		cfg:    cfg,
	}, d
}

func (e *runnerEnv) job(t *testing.T, name string) *longhorn.RecurringJob {
	t.Helper()
	j, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (e *runnerEnv) waitJob(t *testing.T, name, what string, timeout time.Duration, cond func(*longhorn.RecurringJob) bool) *longhorn.RecurringJob {
	t.Helper()
	var job *longhorn.RecurringJob
	eventually(t, timeout, what, func() (bool, error) {
		j, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		return cond(j), nil
	})
	return job
}

// attachedVolume creates a small volume labelled for job and attaches it
// to the node that holds its replica (the manager that created it).
func (e *runnerEnv) attachedVolume(t *testing.T, name, job string) {
	t.Helper()
	e.call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/"+name+"?action=recurringJobAdd", `{"name":"`+job+`","isGroup":false}`).expect(t, 200)
	v := e.waitVolume(t, name, "created with its replica", func(m map[string]any) bool {
		replicas, _ := m["replicas"].([]any)
		return m["state"] == "detached" && len(replicas) == 1
	})
	node := v["replicas"].([]any)[0].(map[string]any)["hostId"].(string)
	e.call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"`+node+`"}`).expect(t, 200)
	e.waitVolume(t, name, "attached", func(m map[string]any) bool { return m["state"] == "attached" })
}

// tickSnapshots counts the volume's snapshots made for the job's tick.
func (e *runnerEnv) tickSnapshots(t *testing.T, volume string, tick time.Time) int {
	t.Helper()
	list := e.call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotList", "").expect(t, 200)
	n := 0
	for _, item := range list.body["data"].([]any) {
		labels, _ := item.(map[string]any)["labels"].(map[string]any)
		if labels[types.LabelRecurringJobTick] == tick.UTC().Format("20060102T150405Z") {
			n++
		}
	}
	return n
}

func (e *runnerEnv) events(t *testing.T, job, reason string) []string {
	t.Helper()
	list, err := e.kube.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == job && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

func TestManagerRunnerRunsAnEveryMinuteJobOnceWithTwoManagers(t *testing.T) {
	t.Parallel()
	e, _ := newRunnerEnv(t)
	// A second manager competes for the runner Lease: still one run a tick.
	startDaemon(t, e.cfg, e.ns, "node-2", t.TempDir(), managerRunner)
	// Suspended until its volume is attached: a tick before would run
	// with no volume. A tick that passes meanwhile is caught up at the
	// resume, so the first run is still for the first tick after creation.
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"minutely","task":"snapshot","cron":"* * * * *","retain":3,"suspend":true}`).expect(t, 200)
	e.attachedVolume(t, "vol", "minutely")
	e.call(t, "PUT", "/v1/recurringjobs/minutely", `{"suspend":false}`).expect(t, 200)
	created := e.job(t, "minutely").CreationTimestamp.Time

	job := e.waitJob(t, "minutely", "a run recorded and finished", 100*time.Second, func(j *longhorn.RecurringJob) bool {
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
	if n := e.tickSnapshots(t, "vol", tick); n != 1 {
		t.Fatalf("%d snapshots for tick %s, want 1", n, tick)
	}
	// No CronJob exists for a job of the manager runner.
	if cjs, err := e.kube.BatchV1().CronJobs(e.ns).List(context.Background(), metav1.ListOptions{}); err != nil || len(cjs.Items) != 0 {
		t.Fatalf("CronJobs with the manager runner: %v %v", cjs, err)
	}
	lease, err := e.kube.CoordinationV1().Leases(e.ns).Get(context.Background(), jobcontroller.RunnerLease, metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, "node-") {
		t.Fatalf("runner Lease: %+v %v", lease, err)
	}
	// The next tick runs too, once, and is counted.
	next := job.Status.NextScheduleTime.Time
	job = e.waitJob(t, "minutely", "the next tick run", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && !j.Status.LastScheduleTime.Time.Before(next) && len(j.Status.Active) == 0
	})
	if job.Status.ExecutionCount != 2 {
		t.Errorf("executionCount %d after two ticks", job.Status.ExecutionCount)
	}
	if n := e.tickSnapshots(t, "vol", next); n != 1 {
		t.Errorf("%d snapshots for tick %s, want 1", n, next)
	}
}

// An @every job ticks at its creation plus whole intervals, to the
// second: the catch-up run after a suspension is for such a tick (robfig's
// relative @every made it "an interval before now"), and nextScheduleTime
// is the tick after it on the same grid.
func TestManagerRunnerCountsEveryFromCreation(t *testing.T) {
	t.Parallel()
	e, _ := newRunnerEnv(t)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"interval","task":"snapshot","cron":"@every 1m","retain":3,"suspend":true}`).expect(t, 200)
	e.attachedVolume(t, "vol", "interval")
	created := e.job(t, "interval").CreationTimestamp.Time
	// The tick of creation + 1m passes while suspended, then the job
	// resumes between two ticks.
	time.Sleep(time.Until(created.Add(75 * time.Second)))
	e.call(t, "PUT", "/v1/recurringjobs/interval", `{"suspend":false,"skipImmediately":false}`).expect(t, 200)
	job := e.waitJob(t, "interval", "the catch-up run", 30*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	tick := job.Status.LastScheduleTime.Time
	if d := tick.Sub(created); d <= 0 || d%time.Minute != 0 {
		t.Fatalf("ran the tick %s, %s after the creation at %s: not whole minutes", tick.UTC(), d, created.UTC())
	}
	if next := job.Status.NextScheduleTime; next == nil || !next.After(tick) || next.Sub(created)%time.Minute != 0 {
		t.Fatalf("nextScheduleTime %v after the tick %s of a job created at %s", next, tick.UTC(), created.UTC())
	}
	if n := e.tickSnapshots(t, "vol", tick); n != 1 {
		t.Fatalf("%d snapshots for tick %s, want 1", n, tick)
	}
}

func TestManagerRunnerSuspendAndResumeWithSkip(t *testing.T) {
	t.Parallel()
	e, _ := newRunnerEnv(t)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"paused","task":"snapshot","cron":"* * * * *","retain":1,"suspend":true}`).expect(t, 200)
	created := e.job(t, "paused").CreationTimestamp.Time
	// A tick passes while suspended: no run, and no next tick shown.
	time.Sleep(time.Until(created.Truncate(time.Minute).Add(time.Minute + 3*time.Second)))
	job := e.job(t, "paused")
	if job.Status.LastScheduleTime != nil || job.Status.ExecutionCount != 0 || job.Status.NextScheduleTime != nil {
		t.Fatalf("a suspended job ran or shows a next tick: %+v", job.Status)
	}

	// Resume with skipImmediately: the tick due now is skipped; the
	// field is left as written.
	e.call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":false,"skipImmediately":true}`).expect(t, 200)
	job = e.waitJob(t, "paused", "skip recorded", 15*time.Second, func(j *longhorn.RecurringJob) bool {
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
	job = e.waitJob(t, "paused", "the run after the skip", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && len(j.Status.Active) == 0
	})
	if want := skipped.Truncate(time.Minute).Add(time.Minute); !job.Status.LastScheduleTime.Time.Equal(want) || job.Status.ExecutionCount != 1 {
		t.Fatalf("run after skip at %s for tick %s (count %d), want tick %s", skipped, job.Status.LastScheduleTime, job.Status.ExecutionCount, want)
	}

	// Suspended again, and resumed without skip: the tick missed while
	// suspended runs once, at once.
	e.call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":true}`).expect(t, 200)
	last := job.Status.LastScheduleTime.Time
	time.Sleep(time.Until(last.Add(time.Minute + 3*time.Second)))
	if j := e.job(t, "paused"); j.Status.ExecutionCount != 1 {
		t.Fatalf("ran while suspended: %+v", j.Status)
	}
	e.call(t, "PUT", "/v1/recurringjobs/paused", `{"suspend":false,"skipImmediately":false}`).expect(t, 200)
	job = e.waitJob(t, "paused", "catch-up run after resume", 15*time.Second, func(j *longhorn.RecurringJob) bool {
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
	hold := func(o *DaemonOptions) {
		o.Hooks.RecurringJobBeforeVolume = func(ctx context.Context, job, volume string) {
			if volume == "vol-c" {
				once.Do(func() { close(held) })
				<-ctx.Done() // the manager stops in the middle of the run
			}
		}
	}
	dataDir := t.TempDir()
	e, first := newRunnerEnv(t, hold, func(o *DaemonOptions) { o.DataDir = dataDir })
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"slow","task":"snapshot","cron":"* * * * *","retain":5,"concurrency":1}`).expect(t, 200)
	volumes := []string{"vol-a", "vol-b", "vol-c", "vol-d"}
	for _, v := range volumes {
		e.attachedVolume(t, v, "slow")
	}
	select {
	case <-held:
	case <-time.After(100 * time.Second):
		t.Fatal("the run did not reach vol-c")
	}
	job := e.job(t, "slow")
	if len(job.Status.Active) != 1 {
		t.Fatalf("status.active during the run: %+v", job.Status.Active)
	}
	tick := job.Status.Active[0].ScheduledTime.Time
	// Earlier ticks may have run before every volume was labelled.
	count := job.Status.ExecutionCount
	if e.tickSnapshots(t, "vol-a", tick) != 1 || e.tickSnapshots(t, "vol-c", tick) != 0 {
		t.Fatal("the run is not where the test holds it")
	}
	// Suspending leaves the running run alone: the restart finishes it.
	e.call(t, "PUT", "/v1/recurringjobs/slow", `{"suspend":true}`).expect(t, 200)

	first.stop(t)
	second := startDaemon(t, e.cfg, e.ns, "node-1", dataDir, managerRunner)
	e.base = "http://" + second.apiAddress
	job = e.waitJob(t, "slow", "the interrupted run finished by the new manager", 90*time.Second, func(j *longhorn.RecurringJob) bool {
		return len(j.Status.Active) == 0 && j.Status.LastSuccessfulTime != nil
	})
	if !job.Status.LastScheduleTime.Time.Equal(tick) || job.Status.ExecutionCount != count {
		t.Fatalf("after the restart: %+v (tick %s)", job.Status, tick)
	}
	for _, v := range volumes {
		if n := e.tickSnapshots(t, v, tick); n != 1 {
			t.Errorf("%s has %d snapshots for tick %s, want 1", v, n, tick)
		}
	}
	if ev := e.events(t, "slow", jobcontroller.EventReasonRunResumed); len(ev) == 0 {
		t.Error("no RunResumed event")
	}
}

func TestDaemonRefusesAnUnknownRunner(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	_, err := launchDaemon(t, cluster.Config, cluster.NewNamespace(t), "node-1", t.TempDir(), func(o *DaemonOptions) {
		o.CronJob.Runner = "kubelet"
	})
	if err == nil || !strings.Contains(err.Error(), "--recurring-job-runner") {
		t.Fatalf("got %v", err)
	}
}
