package recurringjob

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// syncOnce syncs job once with the manager runner chosen and returns the
// writes made and the job after them.
func syncOnce(t *testing.T, job *longhorn.RecurringJob) ([]string, *longhorn.RecurringJob) {
	t.Helper()
	lh := lhfake.NewSimpleClientset(job, syncNode("node-1", true))
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	if err := lhi.RecurringJobs().Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	if err := lhi.Nodes().Informer().GetIndexer().Add(syncNode("node-1", true)); err != nil {
		t.Fatal(err)
	}
	c := newSyncTestController(t, lh, kube, inf, longhorn.RecurringJobRunnerManager)
	lh.ClearActions()
	if _, err := c.sync(context.Background(), "ns/daily"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	got, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "daily", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return synctable.Writes(lh.Actions()), got
}

// The status write that takes a job in for the manager runner carries
// its next tick, as the runner computes it: the runner has nothing left
// to write for a new job.
func TestTakingAJobInForTheManagerRunnerRecordsItsNextTick(t *testing.T) {
	w, job := syncOnce(t, syncJob())
	if !slices.Equal(w, []string{"update recurringjobs/status"}) {
		t.Fatalf("writes %v, want one status write", w)
	}
	want := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC) // "0 3 * * *" after syncNow
	if job.Status.NextScheduleTime == nil || !job.Status.NextScheduleTime.Time.Equal(want) {
		t.Fatalf("nextScheduleTime %v, want %s", job.Status.NextScheduleTime, want)
	}
	sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	if runner := nextScheduleTime(sched, jobState(job, false), syncNow); !sameTime(runner, job.Status.NextScheduleTime) {
		t.Fatalf("the runner would write %v over %v", runner, job.Status.NextScheduleTime)
	}

	// The runner keeps it from then on: the controller does not write it
	// back when the runner has moved it.
	moved := metav1.NewTime(want.Add(24 * time.Hour))
	w, job = syncOnce(t, syncJob(func(j *longhorn.RecurringJob) {
		j.Status = *job.Status.DeepCopy()
		j.Status.NextScheduleTime = &moved
	}))
	if len(w) != 0 || !job.Status.NextScheduleTime.Equal(&moved) {
		t.Fatalf("a job taken in already: writes %v, nextScheduleTime %v (want none, %v)", w, job.Status.NextScheduleTime, moved)
	}

	// A suspended job has no next tick.
	_, job = syncOnce(t, syncJob(func(j *longhorn.RecurringJob) { j.Spec.Suspend = true; j.Status.ObservedSuspend = &j.Spec.Suspend }))
	if job.Status.NextScheduleTime != nil {
		t.Fatalf("a suspended job got nextScheduleTime %v", job.Status.NextScheduleTime)
	}
}

// Under the manager runner a job's owner, observed suspend (with the skip
// of the tick due now), schedule and Ready are one status write: the
// runner fires nothing before it.
func TestClaimingANewJobObservesItsSuspendInTheSameWrite(t *testing.T) {
	w, job := syncOnce(t, syncJob(func(j *longhorn.RecurringJob) {
		j.Status = longhorn.RecurringJobStatus{}
		j.Spec.SkipImmediately = ptr.To(true)
	}))
	if !slices.Equal(w, []string{"update recurringjobs/status"}) {
		t.Fatalf("writes %v, want one status write", w)
	}
	if job.Status.OwnerID != "node-1" || job.Status.ObservedSuspend == nil || *job.Status.ObservedSuspend ||
		job.Status.LastSkipped == nil || !job.Status.LastSkipped.Time.Equal(syncNow) {
		t.Fatalf("status after the claim: owner %q, observedSuspend %v, lastSkipped %v; want node-1, false, %s",
			job.Status.OwnerID, job.Status.ObservedSuspend, job.Status.LastSkipped, syncNow)
	}
	if c := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady); c.Status != longhorn.ConditionStatusTrue || !scheduleObserved(job) {
		t.Fatalf("Ready %+v, observed schedule %+v: not in the claim's write", c, job.Status.ObservedSchedule)
	}
}

// Under the CronJob runner a CronJob may fire as soon as it exists, so a
// new job's owner and its skip of the tick due now are stored before the
// CronJob is made, in the same sync.
func TestACronJobIsMadeOnlyOnceTheOwnerAndTheSkipAreStored(t *testing.T) {
	job := newSyncJob(func(j *longhorn.RecurringJob) { j.Spec.SkipImmediately = ptr.To(true) })
	lh := lhfake.NewSimpleClientset(job, syncNode("node-1", true))
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	if err := lhi.RecurringJobs().Informer().GetIndexer().Add(job); err != nil {
		t.Fatal(err)
	}
	if err := lhi.Nodes().Informer().GetIndexer().Add(syncNode("node-1", true)); err != nil {
		t.Fatal(err)
	}
	c := newSyncTestController(t, lh, kube, inf, longhorn.RecurringJobRunnerCronJob)
	made := false
	kube.PrependReactor("create", "cronjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		made = true
		stored, err := lh.Tracker().Get(longhorn.SchemeGroupVersion.WithResource("recurringjobs"), "ns", "daily")
		if err != nil {
			return true, nil, err
		}
		j := stored.(*longhorn.RecurringJob)
		if j.Status.OwnerID != "node-1" || !suspendObserved(j) || j.Status.LastSkipped == nil {
			t.Errorf("the CronJob is made while the stored job has owner %q, observedSuspend %v, lastSkipped %v",
				j.Status.OwnerID, j.Status.ObservedSuspend, j.Status.LastSkipped)
		}
		return false, nil, nil
	})
	if _, err := c.sync(context.Background(), "ns/daily"); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if !made {
		t.Fatal("no CronJob made")
	}
}
