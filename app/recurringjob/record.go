package recurringjob

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/types"
)

// recordVolumes writes what the run did to its volumes in the job's
// last-run annotation, for the metrics. It is read again from the API
// (the run may have taken hours); a failure is logged, not the run's.
func (r *Runner) recordVolumes(ctx context.Context, name string, res Result) {
	value := types.RecurringJobRunVolumes{Tick: r.Tick.UTC().Format(time.RFC3339),
		Succeeded: res.Succeeded, Failed: res.Failed, Skipped: res.Skipped}.Format()
	jobs := r.Longhorn.LonghornV1beta2().RecurringJobs(r.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job, err := jobs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if job.Annotations[types.AnnotationRecurringJobLastRun] == value {
			return nil
		}
		if job.Annotations == nil {
			job.Annotations = map[string]string{}
		}
		job.Annotations[types.AnnotationRecurringJobLastRun] = value
		_, err = jobs.Update(ctx, job, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		r.Log.WithError(err).WithField("recurringJob", name).Warn("Cannot record the run's volumes on the job; its metrics miss this run")
	}
}
