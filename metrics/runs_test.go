package metrics

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestFinishedRuns(t *testing.T) {
	tick := time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: tick.Add(d)} }
	managerRun := longhorn.RecurringJobRun{ScheduledTime: metav1.NewTime(tick), StartTime: at(time.Second), Runner: longhorn.RecurringJobRunnerManager, Name: "node-1"}
	cronRun := longhorn.RecurringJobRun{ScheduledTime: metav1.NewTime(tick), Runner: longhorn.RecurringJobRunnerCronJob, Name: "nightly-29400000"}
	now := tick.Add(time.Minute)
	for _, tc := range []struct {
		name     string
		old, cur longhorn.RecurringJobStatus
		want     []finishedRun
	}{
		{name: "a run starts: nothing ended",
			old: longhorn.RecurringJobStatus{},
			cur: longhorn.RecurringJobStatus{LastScheduleTime: at(0), Active: []longhorn.RecurringJobRun{managerRun}}},
		{name: "a manager run ends with a success",
			old:  longhorn.RecurringJobStatus{LastScheduleTime: at(0), Active: []longhorn.RecurringJobRun{managerRun}},
			cur:  longhorn.RecurringJobStatus{LastScheduleTime: at(0), LastSuccessfulTime: at(50 * time.Second)},
			want: []finishedRun{{result: ResultSucceeded, duration: 59 * time.Second}}},
		{name: "a CronJob run ends without a success: failed, timed from its tick",
			old:  longhorn.RecurringJobStatus{LastScheduleTime: at(0), LastSuccessfulTime: at(-time.Hour), Active: []longhorn.RecurringJobRun{cronRun}},
			cur:  longhorn.RecurringJobStatus{LastScheduleTime: at(0), LastSuccessfulTime: at(-time.Hour)},
			want: []finishedRun{{result: ResultFailed, duration: time.Minute}}},
		{name: "a CronJob run started and ended between two looks",
			old:  longhorn.RecurringJobStatus{LastScheduleTime: at(-time.Hour), LastSuccessfulTime: at(-time.Hour)},
			cur:  longhorn.RecurringJobStatus{LastScheduleTime: at(0), LastSuccessfulTime: at(10 * time.Second)},
			want: []finishedRun{{result: ResultSucceeded}}},
		{name: "a status write that changes nothing of the runs",
			old: longhorn.RecurringJobStatus{LastScheduleTime: at(0), Active: []longhorn.RecurringJobRun{managerRun}},
			cur: longhorn.RecurringJobStatus{LastScheduleTime: at(0), Active: []longhorn.RecurringJobRun{managerRun}, NextScheduleTime: at(time.Hour)}},
		{name: "skipImmediately: the controller records a suspend and a skip",
			old:  longhorn.RecurringJobStatus{},
			cur:  longhorn.RecurringJobStatus{ObservedSuspend: ptr.To(false), LastSkipped: at(0)},
			want: []finishedRun{{result: ResultSkipped}}},
		{name: "a tick while a run is active is forbidden",
			old:  longhorn.RecurringJobStatus{ObservedSuspend: ptr.To(false), LastScheduleTime: at(-time.Hour), Active: []longhorn.RecurringJobRun{managerRun}},
			cur:  longhorn.RecurringJobStatus{ObservedSuspend: ptr.To(false), LastScheduleTime: at(-time.Hour), Active: []longhorn.RecurringJobRun{managerRun}, LastSkipped: at(0)},
			want: []finishedRun{{result: ResultForbidden}}},
		{name: "a tick past its starting deadline is missed",
			old:  longhorn.RecurringJobStatus{ObservedSuspend: ptr.To(false)},
			cur:  longhorn.RecurringJobStatus{ObservedSuspend: ptr.To(false), LastSkipped: at(0)},
			want: []finishedRun{{result: ResultMissed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := finishedRuns(&tc.old, &tc.cur, now)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

func TestRunCountsForgetDeletedJobs(t *testing.T) {
	var c runCounts
	c.add("kept", []finishedRun{{result: ResultSucceeded, duration: 3 * time.Second}})
	c.add("deleted", []finishedRun{{result: ResultFailed}})
	c.addVolumes("deleted", types.RecurringJobRunVolumes{Failed: 1})
	c.forget(func(name string) bool { return name == "kept" })
	if _, ok := c.jobs["deleted"]; ok {
		t.Fatal("the counts of a deleted job are kept")
	}
	j := c.jobs["kept"]
	if j == nil || j.finished[ResultSucceeded] != 1 || j.count != 1 || j.buckets[0] != 0 || j.buckets[1] != 1 {
		t.Fatalf("kept job's counts: %+v", j)
	}
}

func TestNewRunVolumes(t *testing.T) {
	run := func(tick string, failed int) map[string]string {
		return map[string]string{types.AnnotationRecurringJobLastRun: types.RecurringJobRunVolumes{Tick: tick, Succeeded: 2, Failed: failed}.Format()}
	}
	if _, ok := newRunVolumes(nil, nil); ok {
		t.Error("no annotation: a run")
	}
	if v, ok := newRunVolumes(nil, run("2026-11-22T02:00:00Z", 1)); !ok || v.Succeeded != 2 || v.Failed != 1 {
		t.Errorf("the first run: %+v %v", v, ok)
	}
	if _, ok := newRunVolumes(run("2026-11-22T02:00:00Z", 1), run("2026-11-22T02:00:00Z", 1)); ok {
		t.Error("an unchanged annotation (another write to the job) counted again")
	}
	if v, ok := newRunVolumes(run("2026-11-22T02:00:00Z", 1), run("2026-11-22T03:00:00Z", 0)); !ok || v.Failed != 0 {
		t.Errorf("the next run: %+v %v", v, ok)
	}
	for _, bad := range []string{"nonsense", `{"tick":"yesterday","succeeded":1}`, `{"tick":"2026-11-22T02:00:00Z","failed":-3}`} {
		if _, ok := newRunVolumes(nil, map[string]string{types.AnnotationRecurringJobLastRun: bad}); ok {
			t.Errorf("a hand-written %q counted", bad)
		}
	}
}
