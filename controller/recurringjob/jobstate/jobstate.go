// Package jobstate reads a RecurringJob's spec and status as the
// scheduling decision (schedule.Decide) sees them, and builds the status
// fields that keep its time: the next tick, and the observation of a
// suspend with its skip. The controller and the manager runner both use
// it; which of them writes each field is in docs/architecture.md.
package jobstate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// SuspendObserved tells whether the job's current suspend has been
// observed, and so its skipImmediately decision made.
func SuspendObserved(job *longhorn.RecurringJob) bool {
	return job.Status.ObservedSuspend != nil && *job.Status.ObservedSuspend == job.Spec.Suspend
}

// ScheduleObserved reports whether the job's observed schedule is its
// spec's: until the controller has recorded a change, no tick is fired.
func ScheduleObserved(job *longhorn.RecurringJob) bool {
	o := job.Status.ObservedSchedule
	return o != nil && o.Cron == job.Spec.Cron && o.TimeZone == job.Spec.TimeZone
}

// ObserveSuspend records in status the job's suspend as observed at now.
// A job seen created, or resumed, with skipImmediately (skipDefault when
// the spec leaves it out) skips the tick due now: status.lastSkipped is
// set to now, and a run for a tick not after it does nothing. The spec is
// left as it is. It reports whether it skips.
func ObserveSuspend(job *longhorn.RecurringJob, status *longhorn.RecurringJobStatus, now time.Time, skipDefault bool) bool {
	status.ObservedSuspend = ptr.To(job.Spec.Suspend)
	skip := skipDefault
	if job.Spec.SkipImmediately != nil {
		skip = *job.Spec.SkipImmediately
	}
	at := metav1.NewTime(now)
	skipped := !job.Spec.Suspend && skip && (job.Status.LastSkipped == nil || job.Status.LastSkipped.Before(&at))
	if skipped {
		status.LastSkipped = &at
	}
	return skipped
}

// State is what schedule.Decide needs to know of a job; active says
// whether a run of it is in progress.
func State(job *longhorn.RecurringJob, active bool) schedule.State {
	st := schedule.State{
		Created: job.CreationTimestamp.Time,
		Suspend: job.Spec.Suspend,
		// Until the job's suspend is observed (and a skip recorded if
		// there is one), the due tick waits for it.
		SkipImmediately: !SuspendObserved(job),
		Active:          active,
	}
	if t := job.Status.LastScheduleTime; t != nil {
		st.LastSchedule = t.Time
	}
	if t := job.Status.LastSkipped; t != nil {
		st.LastSkipped = t.Time
	}
	if o := job.Status.ObservedSchedule; o != nil && o.Since != nil {
		st.ScheduleChanged = o.Since.Time
	}
	if d := job.Spec.StartingDeadlineSeconds; d != nil {
		st.StartingDeadline = time.Duration(*d) * time.Second
	}
	return st
}

// NextScheduleTime is the tick the job runs at next, as the decision sees
// it: nil while suspended.
func NextScheduleTime(s schedule.Schedule, st schedule.State, now time.Time) *metav1.Time {
	next := schedule.NextTick(s, st, now)
	if next.IsZero() {
		return nil
	}
	return &metav1.Time{Time: next}
}

// SameTime compares two status times to the second, as they are stored.
func SameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Unix() == b.Unix()
}
