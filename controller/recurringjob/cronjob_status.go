package recurringjob

import (
	"math"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// earliestTick and latestTick bound the ticks read from Job names: a Job
// named like "nightly-1" (made by hand) is not one the CronJob controller
// made.
var (
	earliestTick = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latestTick   = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// TickFromJobName reads the schedule tick out of the name of a Job made by
// the CronJob controller for cronJob: <cronjob>-<minutes since the
// epoch>. A Job of another name (one made by hand with kubectl create job
// --from, say) has no tick.
func TickFromJobName(cronJob, name string) (time.Time, bool) {
	digits, ok := strings.CutPrefix(name, cronJob+"-")
	if !ok || cronJob == "" {
		return time.Time{}, false
	}
	minutes, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || minutes <= 0 || minutes > math.MaxInt64/60 {
		return time.Time{}, false
	}
	tick := time.Unix(minutes*60, 0).UTC()
	if tick.Before(earliestTick) || tick.After(latestTick) {
		return time.Time{}, false
	}
	return tick, true
}

// mirrorCronJobStatus copies what the CronJob runner knows into status:
// the last tick (counting a new one as a run), the last success, the
// active runs, and the next tick.
func (c *Controller) mirrorCronJobStatus(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus) error {
	cj, err := c.ds.GetCronJobRO(job.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// Only forward: a CronJob made again (deleted by hand, or after the
	// runner changed) starts with an empty status, which must not erase
	// what the job had.
	if last := cj.Status.LastScheduleTime; last != nil && (status.LastScheduleTime == nil || last.After(status.LastScheduleTime.Time)) {
		status.ExecutionCount++
		status.LastScheduleTime = last.DeepCopy()
	}
	if ok := cj.Status.LastSuccessfulTime; ok != nil && (status.LastSuccessfulTime == nil || ok.After(status.LastSuccessfulTime.Time)) {
		status.LastSuccessfulTime = ok.DeepCopy()
	}
	var active []longhorn.RecurringJobRun
	for _, ref := range cj.Status.Active {
		run := longhorn.RecurringJobRun{Runner: longhorn.RecurringJobRunnerCronJob, Name: ref.Name}
		if tick, ok := TickFromJobName(cj.Name, ref.Name); ok {
			run.ScheduledTime = metav1.NewTime(tick)
		}
		active = append(active, run)
	}
	status.Active = active
	if sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone); err == nil {
		if next := cronJobNextScheduleTime(sched, job, cj, len(active) > 0, c.clock.Now()); !jobstate.SameTime(next, status.NextScheduleTime) {
			status.NextScheduleTime = next
		}
	}
	return nil
}

// cronJobNextScheduleTime is the tick the CronJob fires next. Kubernetes
// counts an @every schedule from the CronJob's last tick, or from its
// creation before one.
func cronJobNextScheduleTime(sched schedule.Schedule, job *longhorn.RecurringJob, cj *batchv1.CronJob, active bool, now time.Time) *metav1.Time {
	st := jobstate.State(job, active)
	st.Anchor = cj.CreationTimestamp.Time
	if last := cj.Status.LastScheduleTime; last != nil {
		st.Anchor = last.Time
	}
	return jobstate.NextScheduleTime(sched, st, now)
}
