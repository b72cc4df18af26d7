package recurringjob

import (
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// setBackupTargetFound sets the draft's BackupTargetFound condition: on
// a job naming a backup target, whether that BackupTarget exists. The
// API refuses a job naming a target that does not exist, so a False one
// is a target deleted after the job was made: the job's runs fail for
// want of it (each backup refused with a 400), and the condition and a
// Warning event on the job, once when it goes False, say which target.
// The spec is left alone: the target may be made again, and the
// condition goes True with it. A job naming no target has no condition.
func (c *Controller) setBackupTargetFound(d *statusDraft, job *longhorn.RecurringJob, log *logrus.Entry) error {
	name := job.Spec.BackupTargetName
	if name == "" {
		d.status.Conditions = withoutCondition(d.status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound)
		return nil
	}
	found := true
	if _, err := c.ds.GetTarget(name); apierrors.IsNotFound(err) {
		found = false
	} else if err != nil {
		return fmt.Errorf("look up backup target %s: %w", name, err)
	}
	before := kit.GetCondition(job.Status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound)
	log = log.WithField("backupTarget", name)
	if !found {
		msg := fmt.Sprintf("spec.backupTargetName: BackupTarget %q does not exist (it was deleted after the job was made): "+
			"the job's runs fail on every volume until it is made again or spec.backupTargetName names another target", name)
		if before.Status != longhorn.ConditionStatusFalse {
			log.Warn("The recurring job's backup target does not exist; its runs fail until it is made again or the job names another")
			c.recorder.Event(job, corev1.EventTypeWarning, longhorn.RecurringJobConditionReasonBackupTargetNotFound, msg)
		}
		d.status.Conditions = kit.SetCondition(d.status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound,
			longhorn.ConditionStatusFalse, longhorn.RecurringJobConditionReasonBackupTargetNotFound, msg, c.clock.Now())
		return nil
	}
	if before.Status == longhorn.ConditionStatusFalse {
		log.Info("The recurring job's backup target exists again")
		c.recorder.Event(job, corev1.EventTypeNormal, longhorn.RecurringJobConditionReasonBackupTargetFound,
			fmt.Sprintf("BackupTarget %q exists again", name))
	}
	d.status.Conditions = kit.SetCondition(d.status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound,
		longhorn.ConditionStatusTrue, longhorn.RecurringJobConditionReasonBackupTargetFound, "", c.clock.Now())
	return nil
}

func withoutCondition(conds []longhorn.Condition, condType string) []longhorn.Condition {
	var out []longhorn.Condition
	for _, c := range conds {
		if c.Type != condType {
			out = append(out, c)
		}
	}
	return out
}

// enqueueJobsOfTarget queues the jobs naming a BackupTarget made or
// deleted, settled ones too: their BackupTargetFound
// condition follows it.
func (c *Controller) enqueueJobsOfTarget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	bt, ok := obj.(*longhorn.BackupTarget)
	if !ok {
		return
	}
	jobs, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		c.Logger.WithError(err).WithField("backupTarget", bt.Name).Warn("Cannot list recurring jobs to re-enqueue those naming the backup target")
		return
	}
	for _, job := range jobs {
		if job.Spec.BackupTargetName != bt.Name {
			continue
		}
		if key, err := cache.MetaNamespaceKeyFunc(job); err == nil {
			c.settled.forget(key)
			c.Queue.Add(key)
		}
	}
}
