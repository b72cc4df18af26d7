package jobstate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestJobStateReadsTheStatus(t *testing.T) {
	at := func(s string) *metav1.Time {
		tm, _ := time.Parse(time.RFC3339, s)
		return &metav1.Time{Time: tm}
	}
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: *at("2026-11-22T08:00:00Z")},
		Spec:       longhorn.RecurringJobSpec{Suspend: true, SkipImmediately: ptr.To(true), StartingDeadlineSeconds: ptr.To(int64(90))},
		Status: longhorn.RecurringJobStatus{
			LastScheduleTime: at("2026-11-22T09:00:00Z"), LastSkipped: at("2026-11-22T09:30:00Z"),
			ObservedSchedule: &longhorn.RecurringJobObservedSchedule{Cron: "0 * * * *", Since: at("2026-11-22T09:40:00Z")},
		},
	}
	st := State(job, true)
	if !st.Suspend || !st.SkipImmediately || !st.Active || st.StartingDeadline != 90*time.Second ||
		!st.Created.Equal(job.CreationTimestamp.Time) || !st.LastSchedule.Equal(job.Status.LastScheduleTime.Time) ||
		!st.LastSkipped.Equal(job.Status.LastSkipped.Time) || !st.ScheduleChanged.Equal(job.Status.ObservedSchedule.Since.Time) {
		t.Fatalf("state %+v", st)
	}
	if ScheduleObserved(job) {
		t.Fatal("a job whose cron differs from the observed one counts as observed")
	}
	job.Spec.Cron = "0 * * * *"
	if !ScheduleObserved(job) {
		t.Fatal("the observed schedule is not recognised")
	}
}

// An @every job's next tick in the status is counted from its creation
// (or last schedule change), as the runner fires it: created 08:59, run at
// 09:59, the next is 10:59, not an hour after now.
func TestNextScheduleTimeOfAnInterval(t *testing.T) {
	at := func(s string) time.Time {
		tm, _ := time.Parse(time.RFC3339, s)
		return tm
	}
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at("2026-11-22T08:59:00Z"))},
		Spec:       longhorn.RecurringJobSpec{Cron: "@every 1h"},
		Status:     longhorn.RecurringJobStatus{LastScheduleTime: &metav1.Time{Time: at("2026-11-22T09:59:00Z")}},
	}
	sched, err := schedule.Parse(job.Spec.Cron, "")
	if err != nil {
		t.Fatal(err)
	}
	next := NextScheduleTime(sched, State(job, false), at("2026-11-22T10:00:00Z"))
	if next == nil || !next.Time.Equal(at("2026-11-22T10:59:00Z")) {
		t.Fatalf("nextScheduleTime %v, want 10:59", next)
	}
	job.Status.ObservedSchedule = &longhorn.RecurringJobObservedSchedule{Cron: "@every 1h", Since: &metav1.Time{Time: at("2026-11-22T10:17:05Z")}}
	next = NextScheduleTime(sched, State(job, false), at("2026-11-22T10:20:00Z"))
	if next == nil || !next.Time.Equal(at("2026-11-22T11:17:05Z")) {
		t.Fatalf("after a change of schedule at 10:17:05, nextScheduleTime %v, want 11:17:05", next)
	}
}
