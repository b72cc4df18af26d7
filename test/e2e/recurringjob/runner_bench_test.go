//go:build e2e

package recurringjob

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/app"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkManagerRunner10000Jobs runs the manager runner over 2,000
// recurring jobs, a size `make bench` runs in a few minutes (300 with
// -short; LONGHORN_BENCH_JOBS=10000 for the full size) on the
// real control plane and reports, each against a bare client-go loop in
// the same run: how fast the jobs are taken in, the manager's CPU use
// while nothing is due, and how fast and how late the ticks fire when
// every job is due in the same minute (the worst case: one status write
// per fire, and each run's own requests). The manager runs in this
// process; the control plane does not, so the CPU figure is the
// manager's (and the benchmark's idle goroutines).
func BenchmarkManagerRunner10000Jobs(b *testing.B) {
	n := 2000
	if testing.Short() {
		n = 300
	}
	if v, err := strconv.Atoi(os.Getenv("LONGHORN_BENCH_JOBS")); err == nil && v > 0 {
		n = v
	}
	for i := 0; i < b.N; i++ {
		benchmarkManagerRunner(b, n)
	}
}

func benchmarkManagerRunner(b *testing.B, n int) {
	cluster := testcluster.Get(b)
	ns := cluster.NewNamespace(b)
	var (
		mu       sync.Mutex
		lateness []time.Duration
		fired    atomic.Int64
	)
	options := func(o *app.DaemonOptions) {
		o.KubeAPIQPS, o.KubeAPIBurst, o.Workers = 2000, 4000, 4
		o.Hooks.OnRecurringJobFired = func(_ string, _ time.Time, late time.Duration) {
			mu.Lock()
			lateness = append(lateness, late)
			mu.Unlock()
			fired.Add(1)
		}
	}
	dataDir := b.TempDir()
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	lh, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	jobs := lh.LonghornV1beta2().RecurringJobs(ns)
	ctx := context.Background()

	// Jobs that fire once a year: nothing is due while idle.
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("job-%05d", i)
	}
	idle := 30 * time.Second
	// The manager's own idle cost, with no job: what the jobs add is told
	// apart from what any manager costs.
	d := framework.StartDaemon(b, cluster.Config, ns, "node-1", dataDir, framework.ManagerRunner, options)
	time.Sleep(5 * time.Second)
	before := cpuTime()
	time.Sleep(idle)
	emptyCPU := (cpuTime() - before).Seconds() / idle.Seconds() * 100
	d.Stop(b)

	// The bare baseline: the same jobs created by a plain client-go loop
	// in a namespace no manager watches, at the same concurrency.
	cpBare := cluster.CPUSeconds()
	bare := newBareJobWrites(b, lh, cluster.NewPlainNamespace(b), names)
	cpBare = cluster.CPUSeconds() - cpBare
	// Start-up: the jobs are created while no manager runs, then the
	// manager starts and takes them in. The namespace is the manager's,
	// so the apiserver adds the finalizer at creation
	// (package/components/mutating-policies/admission.yaml); what that costs the creates is logged.
	createStart := time.Now()
	framework.Parallel(b, runnerBenchConcurrency, names, func(name string) error {
		_, err := jobs.Create(ctx, &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 0 1 1 *", Retain: 1},
		}, metav1.CreateOptions{})
		return err
	})
	createRate := float64(n) / time.Since(createStart).Seconds()
	b.Logf("created in the manager's namespace (finalizer added at admission): %.0f jobs/s against %.0f bare creates/s, ratio %.2f",
		createRate, bare.createRate, createRate/bare.createRate)
	takeInLoad := framework.LoadAverage()
	cpTakeIn, cpuTakeIn := cluster.CPUSeconds(), cpuTime()
	start := time.Now()
	d = framework.StartDaemon(b, cluster.Config, ns, "node-1", dataDir, framework.ManagerRunner, options)
	waitJobs(b, lh, ns, n, "taken in (Ready, schedule observed)", 10*time.Minute, func(j *longhorn.RecurringJob) bool {
		return j.Status.ObservedSchedule != nil && j.Status.ObservedSchedule.Cron == j.Spec.Cron && j.Status.NextScheduleTime != nil
	})
	setup := time.Since(start)
	cpTakeIn, cpuTakeIn = cluster.CPUSeconds()-cpTakeIn, cpuTime()-cpuTakeIn
	// Processor time per job: the control plane's (apiserver and etcd)
	// for a bare create and for a take-in, and this process's during the
	// take-in (the manager's, with the benchmark's own watch).
	msPerJob := func(seconds float64) float64 { return seconds * 1000 / float64(n) }
	b.Logf("start-up: processor time per job: the control plane %.2f ms taking in, %.2f ms per bare create; the manager (and the benchmark's watch) %.2f ms",
		msPerJob(cpTakeIn), msPerJob(cpBare), msPerJob(cpuTakeIn.Seconds()))
	b.ReportMetric(msPerJob(cpTakeIn), "take-in-controlplane-cpu-ms/job")
	b.ReportMetric(msPerJob(cpBare), "bare-create-controlplane-cpu-ms/job")
	b.ReportMetric(msPerJob(cpuTakeIn.Seconds()), "take-in-manager-cpu-ms/job")
	b.Logf("start-up: %d jobs in place taken in %s after the manager's start (load average %s): %.0f jobs/s against %.0f bare creates/s, ratio %.2f; requests per job: %s",
		n, setup.Round(100*time.Millisecond), takeInLoad, float64(n)/setup.Seconds(), bare.createRate, float64(n)/setup.Seconds()/bare.createRate,
		writesPerJob(framework.Scrape{}, (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b), n))

	time.Sleep(5 * time.Second) // let the last writes' events settle
	// The scrape is outside the window: with 2,000 jobs one /metrics
	// scrape (about 40,000 series) takes more CPU than 30 s of idling.
	idleMetrics := (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b)
	before = cpuTime()
	stopProfile := profileIdle(b)
	time.Sleep(idle)
	idleCPU := (cpuTime() - before).Seconds() / idle.Seconds() * 100
	stopProfile()
	before = cpuTime()
	afterIdle := (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b)
	scrapeCPU := cpuTime() - before
	b.Logf("idle: %.2f%% of one core over %s with %d jobs, %.2f%% with none (load average %s); a /metrics scrape took %s of CPU; requests in all: %s",
		idleCPU, idle, n, emptyCPU, framework.LoadAverage(), scrapeCPU.Round(time.Millisecond), perJob(idleMetrics, afterIdle, 1))

	// Every job due in the same minute, far enough ahead that all the
	// updates land first. The baseline's status writes run before and
	// after the burst (baseline, manager, baseline).
	perWrite := setup / time.Duration(3*n)
	due := time.Now().Add(90*time.Second + 4*perWrite*time.Duration(n)).UTC().Truncate(time.Minute).Add(time.Minute)
	cron := fmt.Sprintf("%d %d * * *", due.Minute(), due.Hour())
	framework.Parallel(b, runnerBenchConcurrency, names, func(name string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			j, err := jobs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			j.Spec.Cron = cron
			_, err = jobs.Update(ctx, j, metav1.UpdateOptions{})
			return err
		})
	})
	waitJobs(b, lh, ns, n, "new schedule observed", 10*time.Minute, func(j *longhorn.RecurringJob) bool {
		return j.Status.ObservedSchedule != nil && j.Status.ObservedSchedule.Cron == cron
	})
	if lead := time.Until(due); lead < 5*time.Second {
		b.Fatalf("the schedule change landed %s before the tick; raise the lead", lead)
	}
	bareBefore := bare.statusWrites(b, due)
	if lead := time.Until(due); lead < 5*time.Second {
		b.Fatalf("the baseline's writes ended %s before the tick; raise the lead", lead)
	}
	metricsBefore := (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b)
	deadline := time.Now().Add(time.Until(due) + 10*time.Minute)
	for fired.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(time.Second)
	}
	if got := fired.Load(); got < int64(n) {
		b.Fatalf("%d of %d jobs fired", got, n)
	}
	burstLoad := framework.LoadAverage()
	mu.Lock()
	slices.Sort(lateness)
	p50, p99, worst := lateness[len(lateness)/2], lateness[len(lateness)*99/100], lateness[len(lateness)-1]
	mu.Unlock()
	b.Logf("lateness of %d ticks due at once (%s): p50 %s, p99 %s, max %s (load average %s)", n, due.Format(time.RFC3339),
		p50.Round(time.Millisecond), p99.Round(time.Millisecond), worst.Round(time.Millisecond), burstLoad)
	waitJobs(b, lh, ns, n, "runs ended", 10*time.Minute, func(j *longhorn.RecurringJob) bool {
		return len(j.Status.Active) == 0 && j.Status.LastSuccessfulTime != nil
	})
	b.Logf("every run ended within %s of the tick; requests per job fired: %s",
		time.Since(due).Round(time.Second), perJob(metricsBefore, (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b), n))
	bareAfter := bare.statusWrites(b, due.Add(time.Minute))
	bareRate := (bareBefore + bareAfter) / 2
	fireRate := float64(n) / worst.Seconds()
	b.Logf("fired %.0f jobs/s against a bare loop's %.0f status writes/s (%.0f before, %.0f after; concurrency %d): ratio %.2f (goal >= 0.5); p99 lateness %.1f s against n/bare rate %.1f s (goal <= 2x)",
		fireRate, bareRate, bareBefore, bareAfter, runnerBenchConcurrency, fireRate/bareRate, p99.Seconds(), float64(n)/bareRate)

	// A restart with every job in place: the new manager syncs each job
	// again and finds nothing to write but its heartbeats.
	d.Stop(b)
	start = time.Now()
	d = framework.StartDaemon(b, cluster.Config, ns, "node-1", dataDir, framework.ManagerRunner, options)
	synced := func(s framework.Scrape) float64 {
		return s.Sum("longhorn_manager_reconcile_total", `controller="longhorn-recurring-job"`)
	}
	for synced((&framework.DaemonProcess{API: d.APIAddress}).Metrics(b)) < float64(n) {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("after a restart, %d jobs were not all synced within 10 minutes", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	restartSync := time.Since(start)
	time.Sleep(10 * time.Second) // what the syncs' writes would bring back
	restarted := (&framework.DaemonProcess{API: d.APIAddress}).Metrics(b)
	heartbeats := restarted.APIWrites(`resource="leases"`) + restarted.APIWrites(`resource="nodes/status"`)
	restartWrites := restarted.APIWrites() - heartbeats
	b.Logf("restart with %d jobs in place: every job synced %s after the start (load average %s); in the next 10 s, %.0f API writes but %.0f heartbeats; writes in all: %s",
		n, restartSync.Round(time.Millisecond), framework.LoadAverage(), restartWrites, heartbeats, writesPerJob(framework.Scrape{}, restarted, 1))
	b.ReportMetric(restartWrites, "restart-writes")

	b.ReportMetric(fireRate/bareRate, "fire-rate-ratio")
	b.ReportMetric(float64(n)/setup.Seconds()/bare.createRate, "take-in-ratio")
	b.ReportMetric(float64(n), "jobs")
	b.ReportMetric(idleCPU, "idle-cpu-%")
	b.ReportMetric(emptyCPU, "idle-cpu-no-jobs-%")
	b.ReportMetric(scrapeCPU.Seconds()*1000, "scrape-cpu-ms")
	b.ReportMetric(p50.Seconds(), "p50-lateness-s")
	b.ReportMetric(p99.Seconds(), "p99-lateness-s")
	b.ReportMetric(setup.Seconds(), "setup-s")
}

// waitJobs watches the jobs until every one of the n meets cond: a watch
// sees the moment the last one does, at no cost to the apiserver, where
// polling a list of 10,000 jobs is either coarse or a load of its own.
func waitJobs(b *testing.B, lh lhclientset.Interface, ns string, n int, what string, timeout time.Duration, cond func(*longhorn.RecurringJob) bool) {
	var (
		mu    sync.Mutex
		met   = map[string]bool{}
		count int
		done  = make(chan struct{})
	)
	see := func(obj any) {
		j, ok := obj.(*longhorn.RecurringJob)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		now := cond(j)
		if now != met[j.Name] {
			if now {
				count++
			} else {
				count--
			}
		}
		met[j.Name] = now
		if count == n && done != nil {
			close(done)
			done = nil
		}
	}
	finished := done
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: cache.NewListWatchFromClient(lh.LonghornV1beta2().RESTClient(), "recurringjobs", ns, fields.Everything()),
		ObjectType:    &longhorn.RecurringJob{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    see,
			UpdateFunc: func(_, cur any) { see(cur) },
		},
	})
	stop := make(chan struct{})
	defer close(stop)
	go informer.Run(stop)
	select {
	case <-finished:
	case <-time.After(timeout):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("%s: %d of %d jobs after %s", what, count, n, timeout)
	}
}

// cpuTime is the user and system CPU time of this process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// profileIdle writes a CPU profile of the idle phase alone to the file
// LONGHORN_BENCH_IDLE_PROFILE names, and an execution trace of it (which
// goroutine woke which, for what a CPU profile puts down to the
// runtime) to LONGHORN_BENCH_IDLE_TRACE, if set (not with -cpuprofile or
// -trace); it returns the function that stops them.
func profileIdle(b *testing.B) func() {
	stopTrace := func() {}
	if path := os.Getenv("LONGHORN_BENCH_IDLE_TRACE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			b.Fatal(err)
		}
		stopTrace = func() {
			trace.Stop()
			f.Close()
		}
	}
	path := os.Getenv("LONGHORN_BENCH_IDLE_PROFILE")
	if path == "" {
		return stopTrace
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		stopTrace()
	}
}
