package managerrunner

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A fired run's end is written on the object the fire's write returned,
// the run's record of its volumes first, the status on what that write
// returned: no read of the job from the apiserver and no write refused
// for a stale copy (a burst of 2,000 due jobs read each job again after
// a conflict with the run's own write of its record).
func TestAFiredRunEndsWithoutReadingTheJobAgain(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns", ResourceVersion: "1"},
		Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 * * * *", Retain: 1, Concurrency: 1},
	})
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	ds := datastore.New("ns", lh, kube, inf)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 1, 0, 2, 0, time.UTC))
	enforceResourceVersions(lh)
	ran := 0
	rec := &types.RecurringJobRunVolumes{Tick: "2026-11-22T01:00:00Z", Succeeded: 2}
	r := New(logrus.NewEntry(log), nil, nil, ds, inf, record.NewFakeRecorder(10), clk, Config{Identity: "node-1"},
		func(context.Context, string, time.Time) (*types.RecurringJobRunVolumes, error) {
			ran++
			return rec, nil
		})
	ctx := context.Background()
	job, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := schedule.Parse(job.Spec.Cron, job.Spec.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	lh.ClearActions()

	tick := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	if err := r.fire(ctx, job, sched, schedule.Decision{Action: schedule.Run, Tick: tick, Requeue: time.Hour}, clk.Now(), r.logger); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()

	var gets, statusWrites, writes int
	for _, a := range lh.Actions() {
		switch {
		case a.GetVerb() == "get" && a.GetResource().Resource == "recurringjobs":
			gets++
		case a.GetVerb() == "update" && a.GetSubresource() == "status":
			statusWrites++
		case a.GetVerb() == "update" && a.GetSubresource() == "":
			writes++
		case a.GetVerb() == "list" || a.GetVerb() == "watch":
		default:
			t.Errorf("unexpected request %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	if ran != 1 || gets != 0 || statusWrites != 2 || writes != 1 {
		t.Fatalf("a run: %d runs, %d GETs of the job, %d status writes, %d writes of the record; want 1, 0, 2 and 1 (with no conflict)", ran, gets, statusWrites, writes)
	}
	got, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Active) != 0 || got.Status.LastSuccessfulTime == nil || got.Status.ExecutionCount != 1 ||
		got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Equal(&metav1.Time{Time: tick}) {
		t.Fatalf("status after the run: %+v", got.Status)
	}
	if got.Annotations[types.AnnotationRecurringJobLastRun] != rec.Format() {
		t.Fatalf("last-run annotation %q, want %q", got.Annotations[types.AnnotationRecurringJobLastRun], rec.Format())
	}
}

// enforceResourceVersions makes the fake clientset's updates of
// RecurringJobs behave as the apiserver's: refused with a conflict when
// the object sent is not at the stored resourceVersion, and a status
// update changing only the status.
func enforceResourceVersions(lh *lhfake.Clientset) {
	gvr := longhorn.SchemeGroupVersion.WithResource("recurringjobs")
	lh.PrependReactor("update", "recurringjobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sent := a.(k8stesting.UpdateAction).GetObject().(*longhorn.RecurringJob)
		obj, err := lh.Tracker().Get(gvr, sent.Namespace, sent.Name)
		if err != nil {
			return true, nil, err
		}
		stored := obj.(*longhorn.RecurringJob)
		if sent.ResourceVersion != stored.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), sent.Name, fmt.Errorf("sent at %s, stored at %s", sent.ResourceVersion, stored.ResourceVersion))
		}
		next := sent.DeepCopy()
		if a.GetSubresource() == "status" {
			next = stored.DeepCopy()
			next.Status = sent.Status
		} else {
			next.Status = stored.Status
		}
		v, _ := strconv.Atoi(stored.ResourceVersion)
		next.ResourceVersion = strconv.Itoa(v + 1)
		return true, next.DeepCopy(), lh.Tracker().Update(gvr, next, next.Namespace)
	})
}
