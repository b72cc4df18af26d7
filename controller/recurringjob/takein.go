package recurringjob

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// firstNextScheduleTime is the next tick of a job the manager runner
// fires, as the runner would record it, for the controller's status write
// that takes the job in: the runner then finds it in place and has
// nothing to write for a new job, one write per job fewer. Only a job
// without one gets it; after that the runner alone keeps it, so the two
// never write it in turn.
func firstNextScheduleTime(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus, now time.Time) *metav1.Time {
	if status.NextScheduleTime != nil {
		return status.NextScheduleTime
	}
	sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone)
	if err != nil {
		return nil
	}
	withStatus := job.DeepCopy()
	withStatus.Status = *status
	active := false
	for _, run := range status.Active {
		active = active || run.Runner == longhorn.RecurringJobRunnerManager
	}
	return nextScheduleTime(sched, jobState(withStatus, active), now)
}
