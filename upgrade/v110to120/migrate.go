package v110to120

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

// Migrate runs the whole migration: volumes, StorageClasses and the
// default StorageClass ConfigMap, then any old CronJob left over.
func Migrate(ctx context.Context, c step.Clients) error {
	if err := migrateVolumes(ctx, c); err != nil {
		return err
	}
	if err := migrateStorageClasses(ctx, c); err != nil {
		return err
	}
	if err := migrateStorageClassConfigMap(ctx, c); err != nil {
		return err
	}
	return deleteLeftoverCronJobs(ctx, c)
}

// ensureJob creates the RecurringJob of an old entry unless it exists.
func ensureJob(ctx context.Context, c step.Clients, entry longhorn.VolumeRecurringJobSpec) (string, error) {
	job, err := recurringJob(entry)
	if err != nil {
		return "", err
	}
	err = c.Call(ctx, "create RecurringJob "+job.Name, func(ctx context.Context) error {
		_, err := c.Longhorn.LonghornV1beta2().RecurringJobs(c.Namespace).Create(ctx, job, metav1.CreateOptions{})
		return err
	})
	switch {
	case apierrors.IsAlreadyExists(err):
		return job.Name, nil
	case err != nil:
		return "", fmt.Errorf("create RecurringJob %s for the old job %q: %w", job.Name, entry.Name, err)
	}
	c.Log.WithFields(logrus.Fields{"recurringJob": job.Name, "task": entry.Task, "cron": entry.Cron, "retain": entry.Retain}).Info("Created RecurringJob from an old per-volume job")
	return job.Name, c.Step("create recurringjob " + job.Name)
}

// migrateVolumes moves every volume's spec.recurringJobs to labels. For
// each volume: the jobs are created, the volume's old CronJobs deleted,
// and only then the volume rewritten in one write (labels added and the
// old list cleared), so a crash at any point leaves the old list in place
// to be migrated again.
func migrateVolumes(ctx context.Context, c step.Clients) error {
	var volumes *longhorn.VolumeList
	err := c.Call(ctx, "list Volumes", func(ctx context.Context) (err error) {
		volumes, err = c.Longhorn.LonghornV1beta2().Volumes(c.Namespace).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	migrated := 0
	for i := range volumes.Items {
		v := &volumes.Items[i]
		if len(v.Spec.RecurringJobs) == 0 {
			// A volume without old jobs joins the default group, as every
			// volume that selects nothing does in the label model.
			if err := applyDefaultGroup(ctx, c, v); err != nil {
				return err
			}
			continue
		}
		log := c.Log.WithField("volume", v.Name)
		var jobs []string
		for _, entry := range v.Spec.RecurringJobs {
			name, err := ensureJob(ctx, c, entry)
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			jobs = append(jobs, name)
		}
		for _, entry := range v.Spec.RecurringJobs {
			if err := deleteOldCronJob(ctx, c, v.Name+"-"+entry.Name+"-c"); err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		// Read afresh on each try: a conflict, or an update that timed
		// out and may have been applied, is tried again on the newest
		// version (the same update twice is the same state).
		err := c.Call(ctx, "update Volume "+v.Name, func(ctx context.Context) error {
			return datastore.RetryOnConflict(func() error {
				fresh, err := c.Longhorn.LonghornV1beta2().Volumes(c.Namespace).Get(ctx, v.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if fresh.Labels == nil {
					fresh.Labels = map[string]string{}
				}
				for _, job := range jobs {
					fresh.Labels[types.RecurringJobLabelKey(job)] = types.LabelValueEnabled
				}
				fresh.Labels, _ = datastore.FixupRecurringJobLabels(fresh.Labels)
				fresh.Spec.RecurringJobs = nil
				_, err = c.Longhorn.LonghornV1beta2().Volumes(c.Namespace).Update(ctx, fresh, metav1.UpdateOptions{})
				return err
			})
		})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("volume %s: move its recurring jobs to labels: %w", v.Name, err)
		}
		log.WithField("recurringJobs", jobs).Info("Volume now selects its recurring jobs by label")
		migrated++
		if err := c.Step("update volume " + v.Name); err != nil {
			return err
		}
	}
	c.Log.WithFields(logrus.Fields{"volumes": migrated, "of": len(volumes.Items)}).Info("Migrated the volumes' recurring jobs")
	return nil
}

func applyDefaultGroup(ctx context.Context, c step.Clients, v *longhorn.Volume) error {
	labels, changed := datastore.FixupRecurringJobLabels(v.Labels)
	if !changed {
		return nil
	}
	updated := v.DeepCopy()
	updated.Labels = labels
	err := c.Call(ctx, "label Volume "+v.Name, func(ctx context.Context) error {
		_, err := c.Longhorn.LonghornV1beta2().Volumes(c.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or changed since the list: the volume controller applies
		// the same rule to it on its next sync.
		return nil
	}
	if err != nil {
		return fmt.Errorf("volume %s: add the default recurring-job group: %w", v.Name, err)
	}
	return c.Step("label volume " + v.Name)
}

// deleteOldCronJob deletes a CronJob of the per-volume model.
func deleteOldCronJob(ctx context.Context, c step.Clients, name string) error {
	background := metav1.DeletePropagationBackground
	err := c.Call(ctx, "delete CronJob "+name, func(ctx context.Context) error {
		return c.Kube.BatchV1().CronJobs(c.Namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &background})
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete old CronJob %s: %w", name, err)
	}
	c.Log.WithField("cronJob", name).Info("Deleted an old per-volume CronJob")
	return c.Step("delete cronjob " + name)
}

// oldCronJobVolumeLabels are the label keys v1.1 put on its per-volume
// CronJobs, naming the volume.
var oldCronJobVolumeLabels = []string{types.LabelVolume, "longhorn.io/volume"}

// deleteLeftoverCronJobs deletes per-volume CronJobs whose volume no
// longer lists the job (or is gone): labelled with a volume, named
// <volume>-<job>-c, and not made by this manager.
func deleteLeftoverCronJobs(ctx context.Context, c step.Clients) error {
	for _, key := range oldCronJobVolumeLabels {
		var list *batchv1.CronJobList
		err := c.Call(ctx, "list CronJobs labelled "+key, func(ctx context.Context) (err error) {
			list, err = c.Kube.BatchV1().CronJobs(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: key})
			return err
		})
		if err != nil {
			return fmt.Errorf("list old CronJobs: %w", err)
		}
		for _, cj := range list.Items {
			volume := cj.Labels[key]
			if cj.Labels[types.LabelManagedBy] == types.ManagedByValue || volume == "" {
				continue
			}
			if len(cj.Name) <= len(volume)+3 || cj.Name[:len(volume)+1] != volume+"-" || cj.Name[len(cj.Name)-2:] != "-c" {
				continue
			}
			if err := deleteOldCronJob(ctx, c, cj.Name); err != nil {
				return err
			}
		}
	}
	return nil
}
