package recurringjob

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// recordVolumes writes what the run did to its volumes in the job's
// last-run annotation, for the metrics; a failure is logged, not the
// run's. A run of no volume after another of none writes nothing (there is
// nothing new to count): a job selecting no volume costs no write a tick.
func (r *Runner) recordVolumes(ctx context.Context, name string, res Result) {
	run := types.RecurringJobRunVolumes{Tick: r.Tick.UTC().Format(time.RFC3339),
		Succeeded: res.Succeeded, Failed: res.Failed, Skipped: res.Skipped}
	jobs := r.Longhorn.LonghornV1beta2().RecurringJobs(r.Namespace)
	cached := r.Cache != nil
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		// The manager runner tries its cache first; a conflict reads the
		// API.
		var job *longhorn.RecurringJob
		var err error
		if cached {
			cached = false
			if job, err = r.Cache.GetRecurringJobRO(name); err == nil {
				job = job.DeepCopy()
			}
		}
		if job == nil {
			if job, err = jobs.Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		if !changesRecord(job.Annotations[types.AnnotationRecurringJobLastRun], run) {
			return nil
		}
		if job.Annotations == nil {
			job.Annotations = map[string]string{}
		}
		job.Annotations[types.AnnotationRecurringJobLastRun] = run.Format()
		_, err = jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		r.Log.WithError(err).WithField("recurringJob", name).Warn("Cannot record the run's volumes on the job; its metrics miss this run")
	}
}

// changesRecord tells whether run is worth writing over the annotation's
// value: anything but a run of no volume over another of none.
func changesRecord(previous string, run types.RecurringJobRunVolumes) bool {
	prev, ok := types.ParseRecurringJobLastRun(previous)
	empty := func(v types.RecurringJobRunVolumes) bool { return v.Succeeded == 0 && v.Failed == 0 && v.Skipped == 0 }
	return !ok || !empty(prev) || !empty(run)
}
