package managerrunner

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// syncNow is the runner's clock in the sync table: 10:00:30, half a
// minute after the hourly tick of 10:00.
var syncNow = time.Date(2026, 11, 23, 10, 0, 30, 0, time.UTC)

// takenIn is an hourly job as the controller's take-in leaves it under
// the manager runner: finalizer, owner, schedule and Ready, created at
// 09:30, and none of the fields that keep its time.
func takenIn(mutate ...func(*longhorn.RecurringJob)) *longhorn.RecurringJob {
	job := &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "hourly", Namespace: "ns", ResourceVersion: "1", Finalizers: []string{types.LonghornFinalizer},
			CreationTimestamp: metav1.NewTime(syncNow.Add(-30*time.Minute - 30*time.Second))},
		Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 1, Concurrency: 1},
		Status: longhorn.RecurringJobStatus{
			OwnerID:          "node-1",
			ObservedSchedule: &longhorn.RecurringJobObservedSchedule{Cron: "0 * * * *"},
			Conditions:       []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}},
		},
	}
	for _, m := range mutate {
		m(job)
	}
	return job
}

// TestRunnerSync is the manager runner's sync for a job it keeps the time
// of: each case syncs the job once from the cache and checks the writes,
// the status they left and whether a run started.
func TestRunnerSync(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: syncNow.Truncate(time.Hour).Add(d)} }
	for _, tc := range []struct {
		name        string
		job         *longhorn.RecurringJob
		skipDefault bool
		writes      []string
		ran         bool
		lastSkipped *metav1.Time
		next        *metav1.Time
	}{
		{
			name:   "a job just taken in: its suspend observed and its next tick, in one write; the 10:00 tick runs",
			job:    takenIn(),
			writes: []string{"update recurringjobs/status", "update recurringjobs/status"},
			ran:    true, next: at(time.Hour),
		},
		{
			name:        "taken in with skipImmediately: the tick due now is skipped in the same write, and not run",
			job:         takenIn(func(j *longhorn.RecurringJob) { j.Spec.SkipImmediately = ptr.To(true) }),
			writes:      []string{"update recurringjobs/status"},
			lastSkipped: &metav1.Time{Time: syncNow}, next: at(time.Hour),
		},
		{
			name:        "the daemon's default skips for a job that leaves skipImmediately out",
			job:         takenIn(),
			skipDefault: true,
			writes:      []string{"update recurringjobs/status"},
			lastSkipped: &metav1.Time{Time: syncNow}, next: at(time.Hour),
		},
		{
			name:   "a job taken in before its first tick: one write, nothing to run",
			job:    takenIn(func(j *longhorn.RecurringJob) { j.CreationTimestamp = metav1.NewTime(syncNow.Add(-10 * time.Second)) }),
			writes: []string{"update recurringjobs/status"},
			next:   at(time.Hour),
		},
		{
			name: "suspended: observed, no next tick",
			job: takenIn(func(j *longhorn.RecurringJob) {
				j.Spec.Suspend = true
				j.Status.ObservedSuspend, j.Status.NextScheduleTime = ptr.To(false), at(time.Hour)
			}),
			writes: []string{"update recurringjobs/status"},
		},
		{
			name: "resumed with skipImmediately: the tick missed while suspended is skipped",
			job: takenIn(func(j *longhorn.RecurringJob) {
				j.Spec.SkipImmediately = ptr.To(true)
				j.Status.ObservedSuspend, j.Status.LastScheduleTime = ptr.To(true), at(-time.Hour)
			}),
			writes:      []string{"update recurringjobs/status"},
			lastSkipped: &metav1.Time{Time: syncNow}, next: at(time.Hour),
		},
		{
			name: "resumed without it: the missed tick runs, once",
			job: takenIn(func(j *longhorn.RecurringJob) {
				j.Status.ObservedSuspend, j.Status.LastScheduleTime = ptr.To(true), at(-time.Hour)
			}),
			writes: []string{"update recurringjobs/status", "update recurringjobs/status"},
			ran:    true, next: at(time.Hour),
		},
		{
			name: "kept already, nothing due: no write",
			job: takenIn(func(j *longhorn.RecurringJob) {
				j.Status.ObservedSuspend, j.Status.LastScheduleTime, j.Status.NextScheduleTime = ptr.To(false), at(0), at(time.Hour)
			}),
			next: at(time.Hour),
		},
		{
			name: "not Ready (the controller found it invalid): nothing written, nothing run",
			job: takenIn(func(j *longhorn.RecurringJob) {
				j.Status.Conditions[0].Status = longhorn.ConditionStatusFalse
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.job)
			enforceResourceVersions(lh)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			if err := inf.Longhorn.Longhorn().V1beta2().RecurringJobs().Informer().GetIndexer().Add(tc.job); err != nil {
				t.Fatal(err)
			}
			ds := datastore.New("ns", lh, kube, inf)
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			ran := make(chan time.Time, 1)
			r := New(logrus.NewEntry(log), nil, nil, ds, inf, record.NewFakeRecorder(10), clocktesting.NewFakeClock(syncNow),
				Config{Identity: "node-1", SkipImmediatelyDefault: tc.skipDefault},
				func(_ context.Context, _ string, tick time.Time) (*types.RecurringJobRunVolumes, error) {
					ran <- tick
					return nil, nil
				})
			lh.ClearActions()
			if _, err := r.sync(context.Background(), "ns/hourly"); err != nil {
				t.Fatalf("sync: %v", err)
			}
			// Only the sync's own writes: a run's end is written after it.
			writes := synctable.Writes(lh.Actions())
			r.wg.Wait()
			if tc.ran && len(writes) > len(tc.writes) {
				writes = writes[:len(tc.writes)]
			}
			if !slices.Equal(writes, tc.writes) {
				t.Fatalf("writes %v, want %v", writes, tc.writes)
			}
			select {
			case tick := <-ran:
				if !tc.ran {
					t.Fatalf("the tick %s ran", tick)
				} else if !tick.Equal(at(0).Time) {
					t.Fatalf("ran the tick %s, want 10:00", tick)
				}
			default:
				if tc.ran {
					t.Fatal("no run started")
				}
			}
			job, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "hourly", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady).Status == longhorn.ConditionStatusTrue &&
				(job.Status.ObservedSuspend == nil || *job.Status.ObservedSuspend != job.Spec.Suspend) {
				t.Errorf("observedSuspend %v, spec.suspend %v", job.Status.ObservedSuspend, job.Spec.Suspend)
			}
			if !jobstate.SameTime(job.Status.LastSkipped, tc.lastSkipped) {
				t.Errorf("lastSkipped %v, want %v", job.Status.LastSkipped, tc.lastSkipped)
			}
			if !jobstate.SameTime(job.Status.NextScheduleTime, tc.next) {
				t.Errorf("nextScheduleTime %v, want %v", job.Status.NextScheduleTime, tc.next)
			}
		})
	}
}
