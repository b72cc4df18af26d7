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
	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/jobstate"
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

// Under the manager runner the controller's take-in is one status write
// with the owner, the schedule and Ready, and none of the fields that
// keep the job's time (observed suspend, lastSkipped, nextScheduleTime):
// the runner alone writes those.
func TestTakingAJobInForTheManagerRunnerLeavesItsTimeToTheRunner(t *testing.T) {
	w, job := syncOnce(t, syncJob(func(j *longhorn.RecurringJob) {
		j.Status = longhorn.RecurringJobStatus{}
		j.Spec.SkipImmediately = ptr.To(true)
	}))
	if !slices.Equal(w, []string{"update recurringjobs/status"}) {
		t.Fatalf("writes %v, want one status write", w)
	}
	if job.Status.OwnerID != "node-1" || !jobstate.ScheduleObserved(job) ||
		kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady).Status != longhorn.ConditionStatusTrue {
		t.Fatalf("status after the take-in: %+v; want owner node-1, the schedule observed, Ready", job.Status)
	}
	if job.Status.ObservedSuspend != nil || job.Status.LastSkipped != nil || job.Status.NextScheduleTime != nil {
		t.Fatalf("the controller wrote the runner's fields: observedSuspend %v, lastSkipped %v, nextScheduleTime %v",
			job.Status.ObservedSuspend, job.Status.LastSkipped, job.Status.NextScheduleTime)
	}

	// A job the runner keeps: the controller writes nothing, whatever the
	// runner recorded (a resume it has not yet observed included).
	at := metav1.NewTime(syncNow.Add(17 * time.Hour))
	w, job = syncOnce(t, syncJob(func(j *longhorn.RecurringJob) {
		j.Status = *job.Status.DeepCopy()
		j.Status.ObservedSuspend = ptr.To(true)
		j.Status.NextScheduleTime = &at
	}))
	if len(w) != 0 || !job.Status.NextScheduleTime.Equal(&at) || !*job.Status.ObservedSuspend || job.Status.LastSkipped != nil {
		t.Fatalf("a job the runner keeps: writes %v, status %+v", w, job.Status)
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
		if j.Status.OwnerID != "node-1" || !jobstate.SuspendObserved(j) || j.Status.LastSkipped == nil {
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
