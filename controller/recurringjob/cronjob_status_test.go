package recurringjob

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

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
