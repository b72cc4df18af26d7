//go:build e2e

package recurringjob

import (
	"strings"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// unixOf is a status time in seconds since the epoch, 0 when unset.
func unixOf(t interface{ Unix() int64 }, set bool) float64 {
	if !set {
		return 0
	}
	return float64(t.Unix())
}

// TestMetricsOfRecurringJobRuns runs jobs on the manager runner (one that
// succeeds, one whose volume fails, one suspended, one that misses its
// starting deadline) and reads /metrics for their exact series; then it
// deletes a job and a volume and finds their series gone.
func TestMetricsOfRecurringJobRuns(t *testing.T) {
	t.Parallel()
	e, _ := framework.NewRunnerEnv(t)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"snap","task":"snapshot","cron":"* * * * *","retain":3}`).Expect(t, 200)
	// No backup target is set: the backup of its volume fails. It waits,
	// suspended, for its volume: a tick before the volume is there and
	// attached would run with no volume, and succeed.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bak","task":"backup","cron":"* * * * *","retain":3,"suspend":true}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"paused","task":"snapshot","cron":"* * * * *","retain":1,"suspend":true}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"late","task":"snapshot","cron":"* * * * *","retain":1,"suspend":true,"startingDeadlineSeconds":10}`).Expect(t, 200)
	e.AttachedVolume(t, "vol-ok", "snap")
	e.AttachedVolume(t, "vol-bad", "bak")
	e.Call(t, "PUT", "/v1/recurringjobs/bak", `{"suspend":false}`).Expect(t, 200)

	// A tick of late passes while it is suspended; resumed 20 s after it,
	// without skip, the tick is past its 10 s deadline: missed.
	created := e.Job(t, "late").CreationTimestamp.Time
	time.Sleep(time.Until(created.Truncate(time.Minute).Add(time.Minute + 20*time.Second)))
	e.Call(t, "PUT", "/v1/recurringjobs/late", `{"suspend":false,"skipImmediately":false}`).Expect(t, 200)
	e.WaitJob(t, "late", "the missed tick recorded", 30*time.Second, func(j *longhorn.RecurringJob) bool { return j.Status.LastSkipped != nil })
	e.WaitJob(t, "snap", "a run of snap finished", 100*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	e.WaitJob(t, "bak", "a run of bak finished", 100*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.ExecutionCount > 0 && len(j.Status.Active) == 0
	})

	// The series follow the jobs' statuses: read both until they agree
	// (a tick may come between the two reads).
	framework.EventuallyAgree(t, 60*time.Second, "the metrics of the jobs", func() string {
		snap, bak, paused, late := e.Job(t, "snap"), e.Job(t, "bak"), e.Job(t, "paused"), e.Job(t, "late")
		m := e.ScrapeMetrics(t)
		if len(snap.Status.Active) > 0 || len(bak.Status.Active) > 0 {
			return "a run is active"
		}
		want := map[string]float64{
			framework.Series("longhorn_recurring_job_info", "recurring_job", "snap", "task", "snapshot", "cron", "* * * * *"): 1,
			framework.Series("longhorn_recurring_job_suspended", "recurring_job", "snap"):                                     0,
			framework.Series("longhorn_recurring_job_suspended", "recurring_job", "paused"):                                   1,
			framework.Series("longhorn_recurring_job_ready", "recurring_job", "snap"):                                         1,
			framework.Series("longhorn_recurring_job_interval_seconds", "recurring_job", "snap"):                              60,
			framework.Series("longhorn_recurring_job_runs_started_total", "recurring_job", "snap"):                            float64(snap.Status.ExecutionCount),
			framework.Series("longhorn_recurring_job_runs_started_total", "recurring_job", "bak"):                             float64(bak.Status.ExecutionCount),
			framework.Series("longhorn_recurring_job_runs_started_total", "recurring_job", "paused"):                          0,
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "snap", "result", "succeeded"):    float64(snap.Status.ExecutionCount),
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "snap", "result", "failed"):       0,
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "bak", "result", "failed"):        float64(bak.Status.ExecutionCount),
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "bak", "result", "succeeded"):     0,
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "late", "result", "missed"):       1,
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "late", "result", "skipped"):      0,
			framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "paused", "result", "succeeded"):  0,
			framework.Series("longhorn_recurring_job_run_duration_seconds_count", "recurring_job", "snap"):                    float64(snap.Status.ExecutionCount),
			framework.Series("longhorn_recurring_job_last_run_failed", "recurring_job", "snap"):                               0,
			framework.Series("longhorn_recurring_job_last_run_failed", "recurring_job", "bak"):                                1,
			framework.Series("longhorn_recurring_job_last_run_timestamp_seconds", "recurring_job", "snap"):                    unixOf(snap.Status.LastScheduleTime, true),
			framework.Series("longhorn_recurring_job_last_success_timestamp_seconds", "recurring_job", "snap"):                unixOf(snap.Status.LastSuccessfulTime, true),
			framework.Series("longhorn_recurring_job_last_success_timestamp_seconds", "recurring_job", "bak"):                 0,
			framework.Series("longhorn_recurring_job_next_run_timestamp_seconds", "recurring_job", "snap"):                    unixOf(snap.Status.NextScheduleTime, snap.Status.NextScheduleTime != nil),
			framework.Series("longhorn_recurring_job_last_run_volumes", "recurring_job", "snap", "result", "succeeded"):       1,
			framework.Series("longhorn_recurring_job_last_run_volumes", "recurring_job", "bak", "result", "failed"):           1,
			framework.Series("longhorn_recurring_job_last_run_volumes", "recurring_job", "bak", "result", "succeeded"):        0,
			framework.Series("longhorn_recurring_job_volumes_total", "recurring_job", "bak", "result", "failed"):              float64(bak.Status.ExecutionCount),
			// vol-ok is snapshotted but selected by no backup job; vol-bad
			// is selected by bak, every minute, and has no backup.
			framework.Series("longhorn_volume_recurring_job", "volume", "vol-ok", "recurring_job", "snap", "task", "snapshot"): 1,
			framework.Series("longhorn_volume_recurring_job", "volume", "vol-bad", "recurring_job", "bak", "task", "backup"):   1,
			framework.Series("longhorn_volume_backup_jobs", "volume", "vol-ok"):                                                0,
			framework.Series("longhorn_volume_backup_jobs", "volume", "vol-bad"):                                               1,
			framework.Series("longhorn_volume_backup_interval_seconds", "volume", "vol-bad", "backup_target", "default"):       60,
			framework.Series("longhorn_volume_last_backup_timestamp_seconds", "volume", "vol-bad", "backup_target", "default"): 0,
			framework.Series("longhorn_volume_snapshots", "volume", "vol-ok"):                                                  e.LiveSnapshots(t, "vol-ok"),
			framework.Series("longhorn_volume_state", "volume", "vol-ok", "state", "attached"):                                 1,
			framework.Series("longhorn_volume_state", "volume", "vol-ok", "state", "detached"):                                 0,
			framework.Series("longhorn_volume_robustness", "volume", "vol-ok", "robustness", "healthy"):                        1,
			framework.Series("longhorn_volume_size_bytes", "volume", "vol-ok"):                                                 4 << 20,
		}
		if late.Status.LastSuccessfulTime == nil {
			// late runs at its ticks after the missed one: succeeded
			// then, with no volume.
			want[framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "late", "result", "succeeded")] = 0
		}
		if diff := framework.ExpectSeries(m, want); diff != "" {
			return diff
		}
		if _, ok := m[framework.Series("longhorn_recurring_job_next_run_timestamp_seconds", "recurring_job", "paused")]; ok || paused.Status.ExecutionCount != 0 {
			t.Fatalf("a suspended job shows a next run or ran: %+v", paused.Status)
		}
		if _, ok := m[framework.Series("longhorn_volume_backup_interval_seconds", "volume", "vol-ok", "backup_target", "default")]; ok {
			t.Fatal("vol-ok has a backup interval, yet no backup job selects it")
		}
		if m[framework.Series("longhorn_volume_last_snapshot_timestamp_seconds", "volume", "vol-ok")] < unixOf(snap.Status.LastScheduleTime, true) {
			t.Fatalf("vol-ok's last snapshot is older than snap's last run: %v", m[framework.Series("longhorn_volume_last_snapshot_timestamp_seconds", "volume", "vol-ok")])
		}
		return ""
	})

	// A deleted job and a deleted volume leave no series.
	e.Call(t, "DELETE", "/v1/recurringjobs/snap", "").Expect(t, 204)
	e.Call(t, "POST", "/v1/volumes/vol-ok?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol-ok", "detached", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "DELETE", "/v1/volumes/vol-ok", "").Expect(t, 204)
	framework.EventuallyAgree(t, 60*time.Second, "the series of snap and vol-ok gone", func() string {
		m := e.ScrapeMetrics(t)
		if left := append(framework.SeriesWith(m, "recurring_job", "snap"), framework.SeriesWith(m, "volume", "vol-ok")...); len(left) > 0 {
			return "series left: " + strings.Join(left, ", ")
		}
		return framework.ExpectSeries(m, map[string]float64{framework.Series("longhorn_volume_backup_jobs", "volume", "vol-bad"): 1})
	})
}
