package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

var (
	jobInfo = newDesc("longhorn_recurring_job_info",
		"A recurring job: its task and cron (always 1).", "recurring_job", "task", "cron")
	jobReady = newDesc("longhorn_recurring_job_ready",
		"Whether the job's spec is valid and it is scheduled (its Ready condition).", "recurring_job")
	jobSuspended = newDesc("longhorn_recurring_job_suspended",
		"Whether the job is suspended (spec.suspend).", "recurring_job")
	jobRunsStarted = newDesc("longhorn_recurring_job_runs_started_total",
		"Runs started, by either runner (status.executionCount).", "recurring_job")
	jobActiveRuns = newDesc("longhorn_recurring_job_active_runs",
		"Runs in progress.", "recurring_job")
	jobLastRun = newDesc("longhorn_recurring_job_last_run_timestamp_seconds",
		"The tick of the job's last run (status.lastScheduleTime); 0 before its first.", "recurring_job")
	jobLastSuccess = newDesc("longhorn_recurring_job_last_success_timestamp_seconds",
		"When a run of the job last did all its volumes (status.lastSuccessfulTime); 0 before one did.", "recurring_job")
	jobNextRun = newDesc("longhorn_recurring_job_next_run_timestamp_seconds",
		"The tick the job runs at next; absent while suspended.", "recurring_job")
	jobLastRunFailed = newDesc("longhorn_recurring_job_last_run_failed",
		"1 when no run is active and the last run's tick is later than the last success: the last run failed (a volume failed, or the run could not happen).", "recurring_job")
	jobInterval = newDesc("longhorn_recurring_job_interval_seconds",
		"The time between the job's next two ticks.", "recurring_job")
	jobRunsFinished = newDesc("longhorn_recurring_job_runs_finished_total",
		"Ticks of the job by what became of them: succeeded, failed, skipped (skipImmediately), missed (past startingDeadlineSeconds), forbidden (a run was active).",
		"recurring_job", "result")
	jobRunDuration = newDesc("longhorn_recurring_job_run_duration_seconds",
		"How long the job's runs took, from start to the status write that ended them.", "recurring_job")
	jobVolumes = newDesc("longhorn_recurring_job_volumes_total",
		"Volumes of the job's runs, by result (succeeded, failed, skipped).", "recurring_job", "result")
	jobLastRunVolumes = newDesc("longhorn_recurring_job_last_run_volumes",
		"Volumes of the job's last run, by result (succeeded, failed, skipped); absent before a run recorded them.", "recurring_job", "result")
)

func (c *Collector) collectJobs(ch chan<- prometheus.Metric, jobs []*longhorn.RecurringJob, now time.Time) {
	exists := map[string]bool{}
	for _, job := range jobs {
		exists[job.Name] = true
		if job.Status.OwnerID != c.nodeID {
			continue
		}
		name := job.Name
		st := job.Status
		gauge(ch, jobInfo, 1, name, string(job.Spec.Task), job.Spec.Cron)
		ready := kit.GetCondition(st.Conditions, longhorn.ConditionTypeReady).Status == longhorn.ConditionStatusTrue
		gauge(ch, jobReady, boolValue(ready), name)
		gauge(ch, jobSuspended, boolValue(job.Spec.Suspend), name)
		counter(ch, jobRunsStarted, float64(st.ExecutionCount), name)
		gauge(ch, jobActiveRuns, float64(len(st.Active)), name)
		var lastRun, lastSuccess time.Time
		if st.LastScheduleTime != nil {
			lastRun = st.LastScheduleTime.Time
		}
		if st.LastSuccessfulTime != nil {
			lastSuccess = st.LastSuccessfulTime.Time
		}
		gauge(ch, jobLastRun, unixSeconds(lastRun), name)
		gauge(ch, jobLastSuccess, unixSeconds(lastSuccess), name)
		failed := len(st.Active) == 0 && !lastRun.IsZero() && lastSuccess.Before(lastRun)
		gauge(ch, jobLastRunFailed, boolValue(failed), name)
		if st.NextScheduleTime != nil && !job.Spec.Suspend {
			gauge(ch, jobNextRun, unixSeconds(st.NextScheduleTime.Time), name)
		}
		if d, ok := cronInterval(job.Spec.Cron, job.Spec.TimeZone, now); ok {
			gauge(ch, jobInterval, d.Seconds(), name)
		}
		if v, ok := types.ParseRecurringJobLastRun(job.Annotations[types.AnnotationRecurringJobLastRun]); ok {
			gauge(ch, jobLastRunVolumes, float64(v.Succeeded), name, ResultSucceeded)
			gauge(ch, jobLastRunVolumes, float64(v.Failed), name, ResultFailed)
			gauge(ch, jobLastRunVolumes, float64(v.Skipped), name, ResultSkipped)
		}
	}
	c.runs.forget(func(name string) bool { return exists[name] })
	c.runs.mu.Lock()
	defer c.runs.mu.Unlock()
	for _, job := range jobs {
		j := c.runs.jobs[job.Name]
		owned := job.Status.OwnerID == c.nodeID
		if owned || j != nil {
			// The owner counts the ticks: its series start at 0, so an
			// increase shows from the first run.
			for _, result := range runResults {
				var n uint64
				if j != nil {
					n = j.finished[result]
				}
				counter(ch, jobRunsFinished, float64(n), job.Name, result)
			}
			buckets := map[float64]uint64{}
			var count uint64
			var sum float64
			if j != nil {
				var cum uint64
				for i, b := range runDurationBuckets {
					cum += j.buckets[i]
					buckets[b] = cum
				}
				count, sum = j.count, j.sum
			} else {
				for _, b := range runDurationBuckets {
					buckets[b] = 0
				}
			}
			ch <- prometheus.MustNewConstHistogram(jobRunDuration, count, sum, buckets, job.Name)
			for _, result := range []string{ResultSucceeded, ResultFailed, ResultSkipped} {
				var n uint64
				if j != nil {
					n = j.volumes[result]
				}
				counter(ch, jobVolumes, float64(n), job.Name, result)
			}
		}
	}
}

// cronInterval is the time between the schedule's next two ticks after now.
func cronInterval(cron, tz string, now time.Time) (time.Duration, bool) {
	s, err := schedule.Parse(cron, tz)
	if err != nil {
		return 0, false
	}
	first := s.Next(now)
	if first.IsZero() {
		return 0, false
	}
	second := s.Next(first)
	if second.IsZero() {
		return 0, false
	}
	return second.Sub(first), true
}
