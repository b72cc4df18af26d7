//go:build e2e

package manager

import (
	"strconv"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestMetricsCountEachRunOnceAcrossManagers: with two managers, the job's
// series are served by one (its owner) and the runs it counts, summed over
// both managers as the alert rules sum them, are the runs that happened,
// whichever manager holds the runner Lease.
func TestMetricsCountEachRunOnceAcrossManagers(t *testing.T) {
	t.Parallel()
	e, first := framework.NewRunnerEnv(t)
	second := framework.StartDaemon(t, e.Cfg, e.NS, "node-2", t.TempDir(), framework.ManagerRunner)
	// Suspended until its volume is attached: a tick before would run
	// with no volume, a run with no volume done.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"minutely","task":"snapshot","cron":"* * * * *","retain":3,"suspend":true}`).Expect(t, 200)
	e.AttachedVolume(t, "vol", "minutely")
	e.Call(t, "PUT", "/v1/recurringjobs/minutely", `{"suspend":false}`).Expect(t, 200)
	e.WaitJob(t, "minutely", "a run finished", 100*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	suspended := framework.Series("longhorn_recurring_job_suspended", "recurring_job", "minutely")
	succeeded := framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "minutely", "result", "succeeded")
	volumes := framework.Series("longhorn_recurring_job_volumes_total", "recurring_job", "minutely", "result", "succeeded")
	framework.EventuallyAgree(t, 60*time.Second, "the job's series on one manager, its runs counted once", func() string {
		job := e.Job(t, "minutely")
		if len(job.Status.Active) > 0 {
			return "a run is active"
		}
		serving := 0
		var runs, done float64
		for _, d := range []*framework.RunningDaemon{first, second} {
			m := framework.ScrapeMetricsAt(t, "http://"+d.APIAddress)
			if _, ok := m[suspended]; ok {
				serving++
			}
			runs += m[succeeded]
			done += m[volumes]
		}
		want := float64(job.Status.ExecutionCount)
		switch {
		case serving != 1:
			return strconv.Itoa(serving) + " managers serve the job's series, want 1"
		case runs != want || done != want:
			return "succeeded runs " + strconv.FormatFloat(runs, 'g', -1, 64) + ", volumes " + strconv.FormatFloat(done, 'g', -1, 64) +
				" summed over both managers; want " + strconv.FormatFloat(want, 'g', -1, 64) + " of each"
		}
		return ""
	})
}
