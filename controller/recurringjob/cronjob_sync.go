package recurringjob

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// This file holds what the Controller does to the job's one
// CronJob: create it or bring it back to the job and the settings, and
// delete it only when the manager made it.

// deleteManagedCronJob removes the job's CronJob, if the manager made one.
func (c *Controller) deleteManagedCronJob(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) error {
	deleted, err := c.deleteOwnCronJob(ctx, job, log)
	if deleted {
		log.Info("Deleted the CronJob of the recurring job: the manager runner fires it")
	}
	return err
}

// deleteOwnCronJob deletes the CronJob named after the job if the manager
// made it (controlled by the job, or labelled managed-by the manager). A
// user's own CronJob that happens to have the name is left alone, with a
// warning: it is not the manager's to delete.
func (c *Controller) deleteOwnCronJob(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) (bool, error) {
	cj, err := c.ds.GetCronJobRO(job.Name)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !isControlledBy(cj, job) && cj.Labels[types.LabelManagedBy] != types.ManagedByValue {
		log.WithField("cronJob", cj.Name).Warn("A CronJob with the recurring job's name is not the manager's: left alone")
		return false, nil
	}
	if err := c.ds.DeleteCronJob(ctx, job.Name); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return true, nil
}

// syncCronJob creates the job's CronJob or brings it back to what the job
// and the settings say, writing only when something differs.
func (c *Controller) syncCronJob(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) error {
	set, err := c.cronJobSettings(log)
	if err != nil {
		return err
	}
	desired := desiredCronJob(job, c.cfg, set)
	live, err := c.ds.GetCronJobRO(job.Name)
	if apierrors.IsNotFound(err) {
		if _, err := c.ds.CreateCronJob(ctx, desired); err != nil {
			return fmt.Errorf("create CronJob for recurring job %s: %w", job.Name, err)
		}
		log.WithField("cron", job.Spec.Cron).Info("Created CronJob")
		return nil
	}
	if err != nil {
		return err
	}
	if !isControlledBy(live, job) && live.Labels[types.LabelManagedBy] != types.ManagedByValue {
		return fmt.Errorf("%w: a CronJob named %s exists that the manager did not make; rename or delete it, and the job gets its own (looked at again within the resync period)",
			errCronJobNameTaken, job.Name)
	}
	merged, changed := mergeCronJob(live, desired)
	if !changed {
		return nil
	}
	if _, err := c.ds.UpdateCronJob(ctx, merged); err != nil {
		return fmt.Errorf("update CronJob for recurring job %s: %w", job.Name, err)
	}
	log.WithField("cron", job.Spec.Cron).Info("Updated CronJob to match the recurring job")
	return nil
}

// cronJobSettings reads the settings every CronJob follows. A pod setting
// whose value does not parse (the datastore already hands out the default,
// empty, for a value that breaks its rule, which the setting controller
// reports) is left out with a warning rather than stopping the sync.
func (c *Controller) cronJobSettings(log *logrus.Entry) (cronJobSettings, error) {
	successful, err := c.ds.GetSettingAsInt(types.SettingNameRecurringSuccessfulJobsHistoryLimit)
	if err != nil {
		return cronJobSettings{}, err
	}
	failed, err := c.ds.GetSettingAsInt(types.SettingNameRecurringFailedJobsHistoryLimit)
	if err != nil {
		return cronJobSettings{}, err
	}
	var readErr error
	placement, perr := types.ParsePodPlacement(func(name types.SettingName) (string, error) {
		v, err := c.ds.GetSettingValue(name)
		if err != nil && readErr == nil {
			readErr = err
		}
		return v, err
	})
	if readErr != nil {
		return cronJobSettings{}, readErr
	}
	if perr != nil {
		log.WithError(perr).Warn("A pod setting of the recurring job pods does not parse; it is left out")
	}
	return cronJobSettings{SuccessfulHistory: int32(successful), FailedHistory: int32(failed), Placement: placement}, nil
}

// errCronJobNameTaken: a CronJob the manager did not make has the job's name.
var errCronJobNameTaken = errors.New("CronJob name taken")

func isControlledBy(cj *batchv1.CronJob, job *longhorn.RecurringJob) bool {
	for _, ref := range cj.OwnerReferences {
		if ref.UID == job.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
