package jobrun

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// recordVolumes writes what the run did to its volumes (Result.Record)
// in the job's last-run annotation, for the metrics; a failure is logged,
// not the run's. Only what changes the record is written
// (RecurringJobRunVolumes.ChangesRecord).
func (r *Executor) recordVolumes(ctx context.Context, name string, run types.RecurringJobRunVolumes) {
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
		if !run.ChangesRecord(job.Annotations[types.AnnotationRecurringJobLastRun]) {
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
