package controller

import (
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TickFromJobName reads the schedule tick out of the name of a Job made by
// the CronJob controller: <cronjob>-<minutes since the epoch>.
func TickFromJobName(name string) (time.Time, bool) {
	i := strings.LastIndex(name, "-")
	if i < 0 {
		return time.Time{}, false
	}
	minutes, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || minutes <= 0 {
		return time.Time{}, false
	}
	return time.Unix(minutes*60, 0).UTC(), true
}

// mirrorCronJobStatus copies what the CronJob runner knows into status:
// the last tick (counting a new one as a run), the last success, the
// active runs, and the next tick.
func (c *RecurringJobController) mirrorCronJobStatus(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus) error {
	cj, err := c.ds.GetCronJobRO(job.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if last := cj.Status.LastScheduleTime; last != nil && (status.LastScheduleTime == nil || last.After(status.LastScheduleTime.Time)) {
		status.ExecutionCount++
	}
	status.LastScheduleTime = cj.Status.LastScheduleTime.DeepCopy()
	status.LastSuccessfulTime = cj.Status.LastSuccessfulTime.DeepCopy()
	var active []longhorn.RecurringJobRun
	for _, ref := range cj.Status.Active {
		run := longhorn.RecurringJobRun{Runner: longhorn.RecurringJobRunnerCronJob, Name: ref.Name}
		if tick, ok := TickFromJobName(ref.Name); ok {
			run.ScheduledTime = metav1.NewTime(tick)
		}
		active = append(active, run)
	}
	status.Active = active
	if sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone); err == nil {
		if next := nextScheduleTime(sched, jobState(job, len(active) > 0), c.clock.Now()); !sameTime(next, status.NextScheduleTime) {
			status.NextScheduleTime = next
		}
	}
	return nil
}
