package managerrunner

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Event reasons of the manager runner.
const (
	EventReasonMissedSchedule  = "MissedSchedule"
	EventReasonForbiddenTick   = "ForbiddenTick"
	EventReasonRunFailed       = "RunFailed"
	EventReasonRunResumed      = "RunResumed"
	EventReasonMissedTicksSeen = "MissedTicks"
)

// finishedRunMemory is how long a finished run is remembered, so a cache
// that has not yet seen the run's end cannot make it look vanished (and
// start it again).
const finishedRunMemory = time.Hour

type runKey struct {
	job  string
	tick int64
}

// runTable is what runs in this process, and what finished lately.
type runTable struct {
	mu       sync.Mutex
	running  map[runKey]struct{}
	finished map[runKey]time.Time
	pruned   time.Time
}

func newRunTable() *runTable {
	return &runTable{running: map[runKey]struct{}{}, finished: map[runKey]time.Time{}}
}

// claim marks the run as running here; false when it runs or ran already.
func (t *runTable) claim(k runKey, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Pruning walks every entry: once a minute is enough, not once a
	// claim (a burst of 10,000 due ticks would walk 10,000 entries each).
	if now.Sub(t.pruned) >= time.Minute {
		for old, at := range t.finished {
			if now.Sub(at) > finishedRunMemory {
				delete(t.finished, old)
			}
		}
		t.pruned = now
	}
	if _, ok := t.running[k]; ok {
		return false
	}
	if at, ok := t.finished[k]; ok && now.Sub(at) <= finishedRunMemory {
		return false
	}
	t.running[k] = struct{}{}
	return true
}

// release ends a run: finished (remembered) or interrupted (forgotten, so
// a later leadership term of this manager may resume it).
func (t *runTable) release(k runKey, finished bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.running, k)
	if finished {
		t.finished[k] = now
	}
}

// activeFor reports whether a run of job is in progress here.
func (t *runTable) activeFor(job string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.running {
		if k.job == job {
			return true
		}
	}
	return false
}

func (r *Runner) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	job, err := r.ds.GetRecurringJobRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	// Only jobs the controller has taken in, found valid and whose
	// schedule it has recorded are fired; its status write brings the job
	// back here.
	if job.DeletionTimestamp != nil || !kit.HasFinalizer(job) ||
		kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady).Status != longhorn.ConditionStatusTrue ||
		!jobstate.ScheduleObserved(job) {
		return kit.Result{}, nil
	}
	sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone)
	if err != nil {
		return kit.Result{}, nil // the controller marks it invalid
	}
	now := r.clock.Now()
	log := r.logger.WithField("recurringJob", name)

	// Runs the status lists that no process runs any more (the manager
	// that started them stopped) are finished here, for their own tick.
	active := r.runs.activeFor(name)
	for _, run := range job.Status.Active {
		if run.Runner != longhorn.RecurringJobRunnerManager {
			continue
		}
		active = true
		if r.start(ctx, name, run.ScheduledTime.Time, true, nil) {
			log.WithFields(logrus.Fields{"tick": run.ScheduledTime.UTC().Format(time.RFC3339), "startedBy": run.Name}).
				Info("Resuming a run whose manager stopped")
			r.recorder.Eventf(job, corev1.EventTypeNormal, EventReasonRunResumed,
				"resumed the run for %s started by %s", run.ScheduledTime.UTC().Format(time.RFC3339), run.Name)
		}
	}

	if !jobstate.SuspendObserved(job) {
		// New to the runner, or suspended or resumed since: the runner
		// records what it saw (and a skip) before it decides.
		if job, err = r.observeSuspend(ctx, job, sched, active, now, log); err != nil {
			return kit.Result{}, err
		}
	}

	st := jobstate.State(job, active)
	d := schedule.Decide(sched, st, now)
	// The decision's next look is kept even when its write fails.
	again := kit.Result{RequeueAfter: d.Requeue}
	switch d.Action {
	case schedule.Run:
		return again, r.fire(ctx, job, sched, d, now, log)
	case schedule.Missed, schedule.Forbidden:
		return again, r.recordNotRun(ctx, job, sched, d, now, log)
	}
	if next := jobstate.NextScheduleTime(sched, st, now); !jobstate.SameTime(next, job.Status.NextScheduleTime) {
		updated := job.DeepCopy()
		updated.Status.NextScheduleTime = next
		_, err := r.ds.UpdateRecurringJobStatus(ctx, updated)
		return again, err
	}
	return again, nil
}

// observeSuspend records the job's suspend as observed, with the skip
// of the tick due now when skipImmediately asks for it, and the next
// tick, in one status write; it returns the job as written. For a new job
// this is the runner's first write, and its only one until the first
// tick.
func (r *Runner) observeSuspend(ctx context.Context, job *longhorn.RecurringJob, sched schedule.Schedule, active bool, now time.Time, log *logrus.Entry) (*longhorn.RecurringJob, error) {
	updated := job.DeepCopy()
	skipped := jobstate.ObserveSuspend(job, &updated.Status, now, r.cfg.SkipImmediatelyDefault)
	updated.Status.NextScheduleTime = jobstate.NextScheduleTime(sched, jobstate.State(updated, active), now)
	written, err := r.ds.UpdateRecurringJobStatus(ctx, updated)
	if err != nil {
		return nil, fmt.Errorf("record the suspend of %s as observed: %w", job.Name, err)
	}
	if skipped {
		log.WithField("lastSkipped", now.UTC().Format(time.RFC3339)).Info("Skipped the tick due now (skipImmediately, the job was created or resumed)")
	}
	return written, nil
}

// fire records the run in the status, then starts it. The write carries
// the cached resourceVersion: a stale cache or a second manager gets a
// conflict instead of starting the tick again.
func (r *Runner) fire(ctx context.Context, job *longhorn.RecurringJob, sched schedule.Schedule, d schedule.Decision, now time.Time, log *logrus.Entry) error {
	tick := metav1.NewTime(d.Tick)
	start := metav1.NewTime(now)
	updated := job.DeepCopy()
	updated.Status.LastScheduleTime = &tick
	updated.Status.ExecutionCount++
	updated.Status.Active = append(updated.Status.Active, longhorn.RecurringJobRun{
		ScheduledTime: tick, StartTime: &start, Runner: longhorn.RecurringJobRunnerManager, Name: r.cfg.Identity,
	})
	updated.Status.NextScheduleTime = jobstate.NextScheduleTime(sched, jobstate.State(updated, true), now)
	written, err := r.ds.UpdateRecurringJobStatus(ctx, updated)
	if err != nil {
		return fmt.Errorf("record the run of %s for %s: %w", job.Name, d.Tick.UTC().Format(time.RFC3339), err)
	}
	lateness := now.Sub(d.Tick)
	r.lateness.Observe(lateness.Seconds())
	if r.cfg.OnFire != nil {
		r.cfg.OnFire(job.Name, d.Tick, lateness)
	}
	if d.MissedTicks > 1 {
		r.recorder.Eventf(job, corev1.EventTypeWarning, EventReasonMissedTicksSeen,
			"%d ticks were due (the manager was down or the job suspended); only the latest, %s, runs", d.MissedTicks, d.Tick.UTC().Format(time.RFC3339))
	}
	log.WithFields(logrus.Fields{"tick": d.Tick.UTC().Format(time.RFC3339), "lateness": lateness.Round(time.Millisecond).String()}).Info("Firing recurring job")
	r.start(ctx, job.Name, d.Tick, false, written)
	return nil
}

// recordNotRun records a tick that will never run: past its starting
// deadline, or due while a run was active (Forbid). lastSkipped moves to
// it, so it is reported once and no later run is for it.
func (r *Runner) recordNotRun(ctx context.Context, job *longhorn.RecurringJob, sched schedule.Schedule, d schedule.Decision, now time.Time, log *logrus.Entry) error {
	tick := metav1.NewTime(d.Tick)
	updated := job.DeepCopy()
	updated.Status.LastSkipped = &tick
	updated.Status.NextScheduleTime = jobstate.NextScheduleTime(sched, jobstate.State(updated, false), now)
	if _, err := r.ds.UpdateRecurringJobStatus(ctx, updated); err != nil {
		return err
	}
	at := d.Tick.UTC().Format(time.RFC3339)
	if d.Action == schedule.Missed {
		msg := fmt.Sprintf("tick %s not run: it is more than startingDeadlineSeconds=%d old", at, *job.Spec.StartingDeadlineSeconds)
		r.recorder.Event(job, corev1.EventTypeWarning, EventReasonMissedSchedule, msg)
		log.WithField("tick", at).Warn("Tick missed its starting deadline; not run")
		return nil
	}
	r.recorder.Eventf(job, corev1.EventTypeNormal, EventReasonForbiddenTick, "tick %s not run: the previous run is still active (concurrency is Forbid)", at)
	log.WithField("tick", at).Info("Tick came while the previous run is active; not run")
	return nil
}

// start runs job for tick in the background unless it runs or ran here
// already; it reports whether it started it. fired is the job as the
// status write that recorded the run returned it (nil for a resumed run):
// the end of the run is written on it, without reading the job again,
// unless someone changed the job since.
func (r *Runner) start(ctx context.Context, job string, tick time.Time, resumed bool, fired *longhorn.RecurringJob) bool {
	key := runKey{job: job, tick: tick.Unix()}
	if !r.runs.claim(key, r.clock.Now()) {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		log := r.logger.WithFields(logrus.Fields{"recurringJob": job, "tick": tick.UTC().Format(time.RFC3339), "resumed": resumed})
		r.waitForFires(ctx)
		select {
		case r.slots <- struct{}{}:
		case <-ctx.Done():
			r.runs.release(key, false, r.clock.Now())
			return
		}
		// A panic in the run is its failure, recorded as any other.
		var record *types.RecurringJobRunVolumes
		runErr := func() (err error) {
			defer panics.Recover(log, &err)
			record, err = r.run(ctx, job, tick)
			return err
		}()
		<-r.slots
		if ctx.Err() != nil {
			// Not finished: it stays active in the status, and the next
			// holder of the Lease (maybe this manager again) finishes it.
			log.Info("Run interrupted; the next holder of the runner Lease finishes it")
			r.runs.release(key, false, r.clock.Now())
			return
		}
		if err := r.finish(ctx, job, tick, runErr, record, fired); err != nil {
			log.WithError(err).Warn("Cannot record the end of the run; the next holder of the runner Lease runs it again")
			r.runs.release(key, false, r.clock.Now())
			return
		}
		r.runs.release(key, true, r.clock.Now())
		r.requeue(r.ds.Namespace()+"/"+job, 0)
	}()
	return true
}

// finish records what the run did to its volumes in the job's last-run
// annotation (when that changes it), then takes the run out of
// status.active and, when it could run, sets lastSuccessfulTime. Its
// first write is based on fired, the fire's own write (no read of the
// job), and the status write on what the annotation's write returned; on
// a conflict, or without fired, it reads the job from the API, not the
// cache, so no write is based on a cache older than the fire's write.
func (r *Runner) finish(ctx context.Context, name string, tick time.Time, runErr error, record *types.RecurringJobRunVolumes, fired *longhorn.RecurringJob) error {
	log := r.logger.WithFields(logrus.Fields{"recurringJob": name, "tick": tick.UTC().Format(time.RFC3339)})
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := fired
		fired = nil // a retry reads the job again
		if job == nil {
			var err error
			job, err = r.ds.GetRecurringJobFresh(ctx, name)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
		}
		if record != nil && record.ChangesRecord(job.Annotations[types.AnnotationRecurringJobLastRun]) {
			annotated := job.DeepCopy()
			if annotated.Annotations == nil {
				annotated.Annotations = map[string]string{}
			}
			annotated.Annotations[types.AnnotationRecurringJobLastRun] = record.Format()
			var err error
			if job, err = r.ds.UpdateRecurringJob(ctx, annotated); apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
		}
		updated := job.DeepCopy()
		updated.Status.Active = slices.DeleteFunc(updated.Status.Active, func(run longhorn.RecurringJobRun) bool {
			return run.Runner == longhorn.RecurringJobRunnerManager && run.ScheduledTime.Unix() == tick.Unix()
		})
		if runErr == nil {
			done := metav1.NewTime(r.clock.Now())
			updated.Status.LastSuccessfulTime = &done
		}
		if _, err := r.ds.UpdateRecurringJobStatus(ctx, updated); apierrors.IsNotFound(err) {
			return nil // deleted: no status to record the end in
		} else if err != nil {
			return err
		}
		if runErr != nil {
			// Not successful: lastSuccessfulTime stays at the last run
			// that did all its volumes.
			log.WithError(runErr).Warn("Run failed")
			r.recorder.Eventf(job, corev1.EventTypeWarning, EventReasonRunFailed, "run for %s failed: %v", tick.UTC().Format(time.RFC3339), runErr)
		}
		return nil
	})
}
