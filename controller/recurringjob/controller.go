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

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
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
	// written: what the controller's own writes returned, so a sync can
	// go on from them and the cache's older copies are not synced.
	written kit.Written
}

// NewController wires the controller to the RecurringJob,
// CronJob, Setting and BackupTarget informers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string,
	recorder record.EventRecorder, clk clock.Clock, cfg CronJobConfig) *Controller {
	jobs := inf.Longhorn.Longhorn().V1beta2().RecurringJobs().Informer()
	cronJobs := inf.Kube.Batch().V1().CronJobs().Informer()
	settings := inf.Longhorn.Longhorn().V1beta2().Settings().Informer()
	volumes := inf.Longhorn.Longhorn().V1beta2().Volumes().Informer()
	targets := inf.Longhorn.Longhorn().V1beta2().BackupTargets().Informer()
	c := &Controller{
		ds: ds, recorder: recorder, clock: clk, cfg: cfg,
		ownership: kit.Ownership{NodeID: nodeID, IsUp: ds.IsNodeUp},
	}
	c.Base = kit.NewBase("longhorn-recurring-job", logger, metrics, c.sync,
		jobs.HasSynced, cronJobs.HasSynced, settings.HasSynced, volumes.HasSynced, targets.HasSynced)
	jobs.AddEventHandler(c.jobEventHandler())
	// A job naming a backup target says whether it exists
	// (setBackupTargetFound): a target made or deleted queues its jobs.
	targets.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.enqueueJobsOfTarget, DeleteFunc: c.enqueueJobsOfTarget})
	// A CronJob changed or deleted by hand brings its job back to the queue,
	// so the edit is reverted at once.
	cronJobs.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool { return cronJobOwner(obj) != "" },
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    c.enqueueCronJobOwner,
			UpdateFunc: func(_, cur any) { c.enqueueCronJobOwner(cur) },
			DeleteFunc: c.enqueueCronJobOwner,
		},
	})
	// The CronJobs depend on the history-limit settings and validation on
	// the max-retention one: a change re-enqueues every job at once.
	settings.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, cur any) {
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

func cronJobOwner(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cj, ok := obj.(*batchv1.CronJob)
	if !ok || cj.Labels[types.LabelManagedBy] != types.ManagedByValue {
		return ""
	}
	return cj.Labels[types.RecurringJobLabel]
}

func (c *Controller) enqueueCronJobOwner(obj any) {
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
		c.written.Forget(key)
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if c.written.Stale(key, job.ResourceVersion) {
		// A sync goes on from what it wrote; the cache has yet to bring
		// that write back, and its event queues the job again.
		return kit.Result{}, nil
	}
	if !c.ownership.Responsible(job.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithField("recurringJob", name)
	if job.DeletionTimestamp != nil {
		if claimed, err := c.ownership.Claim(log, job.Status.OwnerID, func(owner string) error {
			claimed := job.DeepCopy()
			claimed.Status.OwnerID = owner
			_, err := c.ds.UpdateRecurringJobStatus(ctx, claimed)
			return err
		}); claimed || err != nil {
			return kit.Result{}, err
		}
		return kit.Result{}, c.cleanup(ctx, job, log)
	}
	if !kit.HasFinalizer(job) {
		// First sight of a new job the apiserver did not give the
		// finalizer at creation (package/components/mutating-policies/admission.yaml does, in the
		// manager's namespace, from Kubernetes 1.36 on). The spec is the
		// user's: the manager never writes it. The sync goes on from the
		// stored job rather than wait for the informer to bring it back.
		updated := job.DeepCopy()
		kit.AddFinalizer(updated)
		if job, err = c.ds.UpdateRecurringJob(ctx, updated); err != nil {
			return kit.Result{}, err
		}
		c.written.Remember(key, job.ResourceVersion)
	}

	// One status write carries what changed: the owner, the accepted
	// generation, the observed schedule, the Ready condition and, under
	// the CronJob runner, the observed suspend (and a skip) and the
	// CronJob's status. (The manager runner keeps the job's time itself:
	// it observes the suspend and writes the next tick.)
	d := c.takeIn(job)
	if !c.cfg.ManagerRuns() {
		// A CronJob may fire as soon as it exists: the owner and a skip
		// are stored before it is made. (The manager runner fires
		// nothing before the Ready write.)
		if job, err = c.store(ctx, key, job, d, log); err != nil {
			return kit.Result{}, err
		}
		d = c.takeIn(job)
	}
	status := d.status

	warning, verr := c.ds.CheckRecurringJobToRun(job, c.clock.Now())
	if verr != nil {
		return kit.Result{}, c.markInvalid(ctx, key, job, d, verr, log)
	}
	status.ObservedGeneration = job.Generation
	if !jobstate.ScheduleObserved(job) {
		c.observeSchedule(job, status, log)
	}
	if c.cfg.ManagerRuns() {
		// The manager runner fires the job: a CronJob left from the
		// CronJob runner would run it twice.
		if err := c.deleteManagedCronJob(ctx, job, log); err != nil {
			return kit.Result{}, err
		}
	} else {
		if err := c.syncCronJob(ctx, job, log); errors.Is(err, errCronJobNameTaken) {
			// The user's to resolve: said in the job's status, not retried.
			before := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady)
			if before.Reason != longhorn.RecurringJobConditionReasonCronJobNameTaken {
				log.WithError(err).Warn("Recurring job is not scheduled")
				c.recorder.Event(job, corev1.EventTypeWarning, longhorn.RecurringJobConditionReasonCronJobNameTaken, err.Error())
			}
			c.setReady(d, longhorn.ConditionStatusFalse, longhorn.RecurringJobConditionReasonCronJobNameTaken, err.Error())
			_, err := c.store(ctx, key, job, d, log)
			return kit.Result{}, err
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
	c.setReady(d, longhorn.ConditionStatusTrue, reason, warning)
	if err := c.setBackupTargetFound(d, job, log); err != nil {
		return kit.Result{}, err
	}
	if !d.changed(job) {
		c.settled.remember(key, job.ResourceVersion)
		return kit.Result{}, nil
	}
	_, err = c.store(ctx, key, job, d, log)
	return kit.Result{}, err
}

// statusDraft is the status a sync builds for a job, and what to log
// once it is stored.
type statusDraft struct {
	status *longhorn.RecurringJobStatus
	// tookOver: the draft makes this node the owner, in place of
	// previousOwner ("" for none).
	tookOver      bool
	previousOwner string
	// skipped: the draft skips the tick due now (skipImmediately).
	skipped bool
}

func (d *statusDraft) changed(job *longhorn.RecurringJob) bool {
	return kit.StatusChanged(*d.status, job.Status)
}

// takeIn starts the draft of a job's status: this node as its owner
// (Responsible has said it should be) and, under the CronJob runner, when
// the job's suspend is new to the controller, that suspend observed, with
// a skip if it skips the tick due now (jobstate.ObserveSuspend). The
// manager runner observes the suspend itself: the controller never
// writes the fields that keep a manager-run job's time.
func (c *Controller) takeIn(job *longhorn.RecurringJob) *statusDraft {
	d := &statusDraft{status: job.Status.DeepCopy()}
	if owner := job.Status.OwnerID; owner != c.ownership.NodeID {
		d.tookOver, d.previousOwner = true, owner
		d.status.OwnerID = c.ownership.NodeID
	}
	if !c.cfg.ManagerRuns() && !jobstate.SuspendObserved(job) {
		d.skipped = jobstate.ObserveSuspend(job, d.status, c.clock.Now(), c.cfg.SkipImmediatelyDefault)
	}
	return d
}

// store writes the draft as the job's status, when it differs, and
// returns the job as stored, remembered so that the cache's older copy
// is not synced.
func (c *Controller) store(ctx context.Context, key string, job *longhorn.RecurringJob, d *statusDraft, log *logrus.Entry) (*longhorn.RecurringJob, error) {
	if !d.changed(job) {
		return job, nil
	}
	updated := job.DeepCopy()
	updated.Status = *d.status
	stored, err := c.ds.UpdateRecurringJobStatus(ctx, updated)
	if err != nil {
		if d.tookOver {
			return nil, fmt.Errorf("claim ownership: %w", err)
		}
		return nil, err
	}
	c.written.Remember(key, stored.ResourceVersion)
	if d.tookOver {
		log.WithField("previousOwner", d.previousOwner).Info("Took ownership")
	}
	if d.skipped {
		log.WithField("lastSkipped", d.status.LastSkipped.UTC().Format(time.RFC3339)).Info("Skipped the tick due now (skipImmediately, the job was created or resumed)")
	}
	return stored, nil
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

// markInvalid records why the job cannot run and makes sure nothing runs
// it: a CronJob left from an earlier valid spec is deleted.
func (c *Controller) markInvalid(ctx context.Context, key string, job *longhorn.RecurringJob, d *statusDraft, verr error, log *logrus.Entry) error {
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
	c.setReady(d, longhorn.ConditionStatusFalse, longhorn.RecurringJobConditionReasonInvalidSpec, verr.Error())
	_, err = c.store(ctx, key, job, d, log)
	return err
}

// setReady sets the draft's Ready condition (its transition time moves
// only with its status).
func (c *Controller) setReady(d *statusDraft, status longhorn.ConditionStatus, reason, message string) {
	d.status.Conditions = kit.SetCondition(d.status.Conditions, longhorn.ConditionTypeReady, status, reason, message, c.clock.Now())
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
