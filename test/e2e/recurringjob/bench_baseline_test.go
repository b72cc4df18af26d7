//go:build e2e

package recurringjob

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// runnerBenchConcurrency is the concurrency of the runner benchmark's
// clients and of its bare baseline: the manager runner's 16 workers.
const runnerBenchConcurrency = app.RecurringJobRunnerWorkers

// bareJobWrites is the runner benchmark's baseline: a plain client-go
// loop making the writes the manager makes, on jobs of a namespace no
// manager watches.
type bareJobWrites struct {
	lh         lhclientset.Interface
	ns         string
	names      []string
	createRate float64
}

// newBareJobWrites creates the baseline's jobs and measures the rate.
func newBareJobWrites(b *testing.B, lh lhclientset.Interface, ns string, names []string) *bareJobWrites {
	jobs := lh.LonghornV1beta2().RecurringJobs(ns)
	load := framework.LoadAverage()
	start := time.Now()
	framework.Parallel(b, runnerBenchConcurrency, names, func(name string) error {
		_, err := jobs.Create(context.Background(), &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 0 1 1 *", Retain: 1},
		}, metav1.CreateOptions{})
		return err
	})
	w := &bareJobWrites{lh: lh, ns: ns, names: names, createRate: float64(len(names)) / time.Since(start).Seconds()}
	b.Logf("baseline: %.0f creates/s (load average %s)", w.createRate, load)
	return w
}

// statusWrites makes, on every baseline job, the status write that
// fires a run (lastScheduleTime, executionCount, active) and returns
// the writes per second.
func (w *bareJobWrites) statusWrites(b *testing.B, tick time.Time) float64 {
	ctx := context.Background()
	jobs := w.lh.LonghornV1beta2().RecurringJobs(w.ns)
	list, err := jobs.List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	byName := make(map[string]*longhorn.RecurringJob, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	load := framework.LoadAverage()
	start := time.Now()
	framework.Parallel(b, runnerBenchConcurrency, w.names, func(name string) error {
		j := byName[name].DeepCopy()
		at, now := metav1.NewTime(tick), metav1.Now()
		j.Status.LastScheduleTime = &at
		j.Status.ExecutionCount++
		j.Status.Active = []longhorn.RecurringJobRun{{ScheduledTime: at, StartTime: &now, Runner: longhorn.RecurringJobRunnerManager, Name: "bare"}}
		_, err := jobs.UpdateStatus(ctx, j, metav1.UpdateOptions{})
		return err
	})
	rate := float64(len(w.names)) / time.Since(start).Seconds()
	b.Logf("baseline: %.0f status writes/s (load average %s)", rate, load)
	return rate
}

// perJob is the daemon's API requests (by method, resource and code) and
// engine calls between two scrapes, per job, as text. (A benchmark's log
// is cut after 10 lines: each phase logs one.)
func perJob(before, after framework.Scrape, n int) string {
	return requestsPerJob(before, after, n, true)
}

// writesPerJob is perJob without the GETs: from a start, the informers'
// lists and watches would fill the line.
func writesPerJob(before, after framework.Scrape, n int) string {
	return requestsPerJob(before, after, n, false)
}

func requestsPerJob(before, after framework.Scrape, n int, gets bool) string {
	var lines []string
	for series, v := range after {
		if (strings.HasPrefix(series, "longhorn_manager_kube_api_requests_total") || strings.HasPrefix(series, "longhorn_manager_engine_calls_total")) &&
			v != before[series] && (gets || !strings.Contains(series, `method="GET"`)) {
			lines = append(lines, fmt.Sprintf("%s %.2f", strings.TrimPrefix(series, "longhorn_manager_kube_api_requests_total"), (v-before[series])/float64(n)))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, ", ")
}
