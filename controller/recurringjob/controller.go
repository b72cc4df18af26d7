package recurringjob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Controller keeps one CronJob per valid RecurringJob, marks
// invalid jobs Ready=False, and on deletion removes the CronJob and the
// volume labels that selected the job.
//
// Ownership: kit.Ownership with no preferred node, recorded in
// status.ownerID. (The runner fires jobs under its own Lease instead: one
// runner in the cluster, not one owner per job.)
type Controller struct {
	*kit.Base
	ds        *datastore.DataStore
	recorder  record.EventRecorder
	clock     clock.Clock
	ownership kit.Ownership
	cfg       CronJobConfig
	// settled jobs' resyncs are not queued (resync.go).
	settled settledJobs
}

// NewController wires the controller to the RecurringJob,
// CronJob and Setting informers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string,
	recorder record.EventRecorder, clk clock.Clock, cfg CronJobConfig) *Controller {
	jobs := inf.Longhorn.Longhorn().V1beta2().RecurringJobs().Informer()
	cronJobs := inf.Kube.Batch().V1().CronJobs().Informer()
	settings := inf.Longhorn.Longhorn().V1beta2().Settings().Informer()
	volumes := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	c := &Controller{
		ds: ds, recorder: recorder, clock: clk, cfg: cfg,
		ownership: kit.Ownership{NodeID: nodeID, IsUp: ds.IsNodeUp},
	}
	c.Base = kit.NewBase("longhorn-recurring-job", logger, metrics, c.sync,
		jobs.HasSynced, cronJobs.HasSynced, settings.HasSynced, volumes.HasSynced)
	jobs.AddEventHandler(c.jobEventHandler())
	// A CronJob changed or deleted by hand brings its job back to the queue,
	// so the edit is reverted at once.
	cronJobs.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj interface{}) bool { return cronJobOwner(obj) != "" },
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueCronJobOwner,
			UpdateFunc: func(_, cur interface{}) { c.enqueueCronJobOwner(cur) },
			DeleteFunc: c.enqueueCronJobOwner,
		},
	})
	// The CronJobs depend on the history-limit settings and validation on
	// the max-retention one: a change re-enqueues every job at once.
	settings.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(interface{}) { c.enqueueAll() },
		UpdateFunc: func(old, cur interface{}) {
			// Resyncs deliver unchanged objects: only a new value counts.
			o, ok1 := old.(*longhorn.Setting)
			n, ok2 := cur.(*longhorn.Setting)
			if ok1 && ok2 && o.Value == n.Value {
				return
			}
			c.enqueueAll()
		},
	})
	return c
}

func cronJobOwner(obj interface{}) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cj, ok := obj.(*batchv1.CronJob)
	if !ok || cj.Labels[types.LabelManagedBy] != types.ManagedByValue {
		return ""
	}
	return cj.Labels[types.RecurringJobLabel]
}

func (c *Controller) enqueueCronJobOwner(obj interface{}) {
	if name := cronJobOwner(obj); name != "" {
		c.Queue.Add(c.ds.Namespace() + "/" + name)
	}
}

func (c *Controller) enqueueAll() {
	c.settled.forgetAll()
	jobs, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		c.Logger.WithError(err).Warn("Cannot list recurring jobs to re-enqueue them")
		return
	}
	for _, job := range jobs {
		c.Enqueue(job)
	}
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	// Settled again only by a sync that ends Ready with no write.
	c.settled.forget(key)
	job, err := c.ds.GetRecurringJobRO(name)
	if apierrors.IsNotFound(err) {
		// The CronJob goes with it through its owner reference.
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if !c.ownership.Responsible(job.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithField("recurringJob", name)
	if claimed, err := c.ownership.Claim(log, job.Status.OwnerID, func(owner string) error {
		claimed := job.DeepCopy()
		claimed.Status.OwnerID = owner
		// A new job's suspend is observed in the same write (one write
		// fewer to take a job in).
		skipped := !suspendObserved(job) && c.recordSuspend(job, &claimed.Status)
		if _, err := c.ds.UpdateRecurringJobStatus(ctx, claimed); err != nil {
			return err
		}
		if skipped {
			log.WithField("lastSkipped", claimed.Status.LastSkipped.UTC().Format(time.RFC3339)).Info("Skipped the tick due now (skipImmediately, the job was created or resumed)")
		}
		return nil
	}); claimed || err != nil {
		return kit.Result{}, err
	}

	if job.DeletionTimestamp != nil {
		return kit.Result{}, c.cleanup(ctx, job, log)
	}
	if !kit.HasFinalizer(job) {
		// First sight of a new job: the finalizer. The spec is the
		// user's: the manager never writes it.
		updated := job.DeepCopy()
		kit.AddFinalizer(updated)
		_, err := c.ds.UpdateRecurringJob(ctx, updated)
		return kit.Result{}, err
	}
	if !suspendObserved(job) {
		// Created or resumed (or suspended): recorded before anything
		// runs it, so a skip is in place before a tick can run.
		return kit.Result{}, c.observeSuspend(ctx, job, log)
	}

	warning, verr := c.ds.CheckRecurringJobToRun(job, c.clock.Now())
	if verr != nil {
		return kit.Result{}, c.markInvalid(ctx, job, verr, log)
	}
	// One status write carries what changed: the accepted generation, the
	// observed schedule, the CronJob's status, the Ready condition.
	status := job.Status.DeepCopy()
	status.ObservedGeneration = job.Generation
	if !scheduleObserved(job) {
		c.observeSchedule(job, status, log)
	}
	if c.cfg.ManagerRuns() {
		// The manager runner fires the job: a CronJob left from the
		// CronJob runner would run it twice.
		if err := c.deleteManagedCronJob(ctx, job, log); err != nil {
			return kit.Result{}, err
		}
		status.NextScheduleTime = firstNextScheduleTime(job, status, c.clock.Now())
	} else {
		if err := c.syncCronJob(ctx, job, log); errors.Is(err, errCronJobNameTaken) {
			// The user's to resolve: said in the job's status, not retried.
			before := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady)
			if before.Reason != longhorn.RecurringJobConditionReasonCronJobNameTaken {
				log.WithError(err).Warn("Recurring job is not scheduled")
				c.recorder.Event(job, corev1.EventTypeWarning, longhorn.RecurringJobConditionReasonCronJobNameTaken, err.Error())
			}
			return kit.Result{}, c.setReady(ctx, job, longhorn.ConditionStatusFalse, longhorn.RecurringJobConditionReasonCronJobNameTaken, err.Error())
		} else if err != nil {
			return kit.Result{}, err
		}
		if err := c.mirrorCronJobStatus(job, status); err != nil {
			return kit.Result{}, err
		}
	}
	reason := longhorn.RecurringJobConditionReasonScheduled
	if warning != "" {
		reason = longhorn.RecurringJobConditionReasonRetainAboveMaximum
		if before := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady); before.Reason != reason || before.Message != warning {
			log.Warn(warning)
			c.recorder.Event(job, corev1.EventTypeWarning, reason, warning)
		}
	}
	status.Conditions = kit.SetCondition(status.Conditions, longhorn.ConditionTypeReady, longhorn.ConditionStatusTrue, reason, warning, c.clock.Now())
	if !kit.StatusChanged(*status, job.Status) {
		c.settled.remember(key, job.ResourceVersion)
		return kit.Result{}, nil
	}
	updated := job.DeepCopy()
	updated.Status = *status
	_, err = c.ds.UpdateRecurringJobStatus(ctx, updated)
	return kit.Result{}, err
}

// observeSchedule records the job's schedule in status; a change records
// since when, so ticks of the new schedule before the change never run (a
// change of cron causes no immediate run).
func (c *Controller) observeSchedule(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus, log *logrus.Entry) {
	observed := &longhorn.RecurringJobObservedSchedule{Cron: job.Spec.Cron, TimeZone: job.Spec.TimeZone}
	if old := job.Status.ObservedSchedule; old != nil {
		now := metav1.NewTime(c.clock.Now())
		observed.Since = &now
		log.WithFields(logrus.Fields{"from": old.Cron, "to": job.Spec.Cron, "timeZone": job.Spec.TimeZone}).Info("Schedule changed; it takes effect from its next tick")
	}
	status.ObservedSchedule = observed
}

// observeSuspend records spec.suspend as seen. A job seen created, or
// resumed, with skipImmediately (or the daemon's default when unset)
// skips the tick due now: status.lastSkipped is set to now, and a run for
// a tick not after it does nothing. The spec is left as it is.
func (c *Controller) observeSuspend(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) error {
	updated := job.DeepCopy()
	skipped := c.recordSuspend(job, &updated.Status)
	if _, err := c.ds.UpdateRecurringJobStatus(ctx, updated); err != nil {
		return err
	}
	if skipped {
		log.WithField("lastSkipped", updated.Status.LastSkipped.UTC().Format(time.RFC3339)).Info("Skipped the tick due now (skipImmediately, the job was created or resumed)")
	}
	return nil
}

// recordSuspend sets, in status, the job's suspend as observed and, when
// it skips the tick due now, lastSkipped; it reports whether it skips.
func (c *Controller) recordSuspend(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus) bool {
	status.ObservedSuspend = ptr.To(job.Spec.Suspend)
	skip := c.cfg.SkipImmediatelyDefault
	if job.Spec.SkipImmediately != nil {
		skip = *job.Spec.SkipImmediately
	}
	now := metav1.NewTime(c.clock.Now())
	skipped := !job.Spec.Suspend && skip && (job.Status.LastSkipped == nil || job.Status.LastSkipped.Before(&now))
	if skipped {
		status.LastSkipped = &now
	}
	return skipped
}

// markInvalid records why the job cannot run and makes sure nothing runs
// it: a CronJob left from an earlier valid spec is deleted.
func (c *Controller) markInvalid(ctx context.Context, job *longhorn.RecurringJob, verr error, log *logrus.Entry) error {
	deleted, err := c.deleteOwnCronJob(ctx, job, log)
	if err != nil {
		return err
	}
	if deleted {
		log.Info("Deleted the CronJob of a recurring job whose spec became invalid")
	}
	before := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady)
	if before.Status != longhorn.ConditionStatusFalse || before.Message != verr.Error() {
		log.WithError(verr).Warn("Recurring job is invalid; it is not scheduled")
		c.recorder.Event(job, corev1.EventTypeWarning, longhorn.RecurringJobConditionReasonInvalidSpec, verr.Error())
	}
	return c.setReady(ctx, job, longhorn.ConditionStatusFalse, longhorn.RecurringJobConditionReasonInvalidSpec, verr.Error())
}

func (c *Controller) setReady(ctx context.Context, job *longhorn.RecurringJob, status longhorn.ConditionStatus, reason, message string) error {
	conds := kit.SetCondition(job.Status.Conditions, longhorn.ConditionTypeReady, status, reason, message, c.clock.Now())
	if !kit.StatusChanged(conds, job.Status.Conditions) {
		return nil
	}
	updated := job.DeepCopy()
	updated.Status.Conditions = conds
	_, err := c.ds.UpdateRecurringJobStatus(ctx, updated)
	return err
}

// cleanup runs while the job is being deleted: the CronJob goes, every
// volume loses the job's label, and loses a group label of the job only
// where no other job still lists the group; then the finalizer goes.
func (c *Controller) cleanup(ctx context.Context, job *longhorn.RecurringJob, log *logrus.Entry) error {
	if !kit.HasFinalizer(job) {
		return nil
	}
	if _, err := c.deleteOwnCronJob(ctx, job, log); err != nil {
		return fmt.Errorf("delete CronJob of recurring job %s: %w", job.Name, err)
	}
	keys := []string{types.RecurringJobLabelKey(job.Name)}
	others, err := c.ds.ListRecurringJobsRO()
	if err != nil {
		return err
	}
	for _, group := range job.Spec.Groups {
		// The default group label says "this volume selects nothing"; it
		// is kept by the volume label rule, not by any job.
		if group != types.RecurringJobGroupDefault && !groupListedElsewhere(group, job.Name, others) {
			keys = append(keys, types.RecurringJobGroupLabelKey(group))
		}
	}
	cleaned := 0
	for _, key := range keys {
		req, err := labels.NewRequirement(key, selection.Exists, nil)
		if err != nil {
			return err
		}
		volumes, err := c.ds.ListVolumesRO(labels.NewSelector().Add(*req))
		if err != nil {
			return err
		}
		for _, v := range volumes {
			if _, err := c.ds.UpdateVolumeLabels(ctx, v.Name, func(l map[string]string) bool {
				if _, ok := l[key]; !ok {
					return false
				}
				delete(l, key)
				return true
			}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("remove label %s from volume %s: %w", key, v.Name, err)
			}
			cleaned++
		}
	}
	updated := job.DeepCopy()
	kit.RemoveFinalizer(updated)
	if _, err := c.ds.UpdateRecurringJob(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	log.WithFields(logrus.Fields{"labelsRemoved": cleaned, "labelKeys": keys}).Info("Cleaned up the deleted recurring job")
	return nil
}

// groupListedElsewhere reports whether a job other than self, and not being
// deleted itself, lists the group.
func groupListedElsewhere(group, self string, jobs []*longhorn.RecurringJob) bool {
	for _, other := range jobs {
		if other.Name == self || other.DeletionTimestamp != nil {
			continue
		}
		if slices.Contains(other.Spec.Groups, group) {
			return true
		}
	}
	return false
}
