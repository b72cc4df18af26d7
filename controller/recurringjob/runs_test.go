package recurringjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestRunTableRunsATickOnce(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tbl := newRunTable()
	k := runKey{job: "j", tick: now.Unix()}
	if !tbl.claim(k, now) || tbl.claim(k, now) {
		t.Fatal("a running tick was claimed twice")
	}
	if !tbl.activeFor("j") || tbl.activeFor("other") {
		t.Fatal("activeFor is wrong")
	}
	// Interrupted: forgotten, so a later term may resume it.
	tbl.release(k, false, now)
	if tbl.activeFor("j") || !tbl.claim(k, now) {
		t.Fatal("an interrupted tick cannot be resumed")
	}
	// Finished: a stale cache that still lists it active cannot restart it.
	tbl.release(k, true, now)
	if tbl.claim(k, now.Add(finishedRunMemory-time.Second)) {
		t.Fatal("a finished tick was started again")
	}
	if !tbl.claim(runKey{job: "j", tick: now.Add(time.Minute).Unix()}, now) {
		t.Fatal("the next tick cannot start")
	}
	// The memory is bounded in time.
	if !tbl.claim(k, now.Add(finishedRunMemory+time.Second)) {
		t.Fatal("finished runs are remembered forever")
	}
}

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
	st := jobState(job, true)
	if !st.Suspend || !st.SkipImmediately || !st.Active || st.StartingDeadline != 90*time.Second ||
		!st.Created.Equal(job.CreationTimestamp.Time) || !st.LastSchedule.Equal(job.Status.LastScheduleTime.Time) ||
		!st.LastSkipped.Equal(job.Status.LastSkipped.Time) || !st.ScheduleChanged.Equal(job.Status.ObservedSchedule.Since.Time) {
		t.Fatalf("state %+v", st)
	}
	if scheduleObserved(job) {
		t.Fatal("a job whose cron differs from the observed one counts as observed")
	}
	job.Spec.Cron = "0 * * * *"
	if !scheduleObserved(job) {
		t.Fatal("the observed schedule is not recognised")
	}
}

func TestTickFromJobName(t *testing.T) {
	for name, want := range map[string]string{
		"nightly-29400480":          "2025-11-25T00:00:00Z",
		"nightly":                   "",
		"nightly-abc":               "",
		"nightly-0":                 "",
		"nightly-1":                 "", // by hand: 1970 is no CronJob tick
		"other-29400480":            "", // another CronJob's Job
		"nightly-x-29400480":        "",
		"nightly-99999999999999999": "",
	} {
		got, ok := TickFromJobName("nightly", name)
		if want == "" && ok || want != "" && (!ok || got.Format(time.RFC3339) != want) {
			t.Errorf("%s: got %v %v, want %q", name, got, ok, want)
		}
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
	next := nextScheduleTime(sched, jobState(job, false), at("2026-11-22T10:00:00Z"))
	if next == nil || !next.Time.Equal(at("2026-11-22T10:59:00Z")) {
		t.Fatalf("nextScheduleTime %v, want 10:59", next)
	}
	job.Status.ObservedSchedule = &longhorn.RecurringJobObservedSchedule{Cron: "@every 1h", Since: &metav1.Time{Time: at("2026-11-22T10:17:05Z")}}
	next = nextScheduleTime(sched, jobState(job, false), at("2026-11-22T10:20:00Z"))
	if next == nil || !next.Time.Equal(at("2026-11-22T11:17:05Z")) {
		t.Fatalf("after a change of schedule at 10:17:05, nextScheduleTime %v, want 11:17:05", next)
	}
}

// On the CronJob runner, Kubernetes counts an @every schedule from the
// CronJob's last tick, or its creation: the status shows that tick.
func TestCronJobNextScheduleTimeOfAnInterval(t *testing.T) {
	at := func(s string) time.Time {
		tm, _ := time.Parse(time.RFC3339, s)
		return tm
	}
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at("2026-11-22T08:59:00Z"))},
		Spec:       longhorn.RecurringJobSpec{Cron: "@every 1h"},
	}
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(at("2026-11-22T08:59:02Z"))}}
	sched, err := schedule.Parse(job.Spec.Cron, "")
	if err != nil {
		t.Fatal(err)
	}
	if next := cronJobNextScheduleTime(sched, job, cj, false, at("2026-11-22T09:30:00Z")); next == nil || !next.Time.Equal(at("2026-11-22T09:59:02Z")) {
		t.Fatalf("before a run: %v, want 09:59:02", next)
	}
	cj.Status.LastScheduleTime = &metav1.Time{Time: at("2026-11-22T09:59:02Z")}
	job.Status.LastScheduleTime = cj.Status.LastScheduleTime
	if next := cronJobNextScheduleTime(sched, job, cj, false, at("2026-11-22T10:00:00Z")); next == nil || !next.Time.Equal(at("2026-11-22T10:59:02Z")) {
		t.Fatalf("after the run of 09:59:02: %v, want 10:59:02", next)
	}
}
