package recurringjob

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/recurringjob/schedule"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// A fired run's end is written on the object the fire's write returned:
// two status writes per run and no read of the job from the apiserver
// (a burst of 10,000 due jobs read each job again, 10,000 GETs).
func TestAFiredRunEndsWithoutReadingTheJobAgain(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"},
		Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 * * * *", Retain: 1, Concurrency: 1},
	})
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	ds := datastore.New("ns", lh, kube, inf)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 1, 0, 2, 0, time.UTC))
	ran := 0
	r := NewRunner(logrus.NewEntry(log), nil, nil, ds, inf, record.NewFakeRecorder(10), clk, RunnerConfig{Identity: "node-1"},
		func(context.Context, string, time.Time) error { ran++; return nil })
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

	var gets, statusWrites int
	for _, a := range lh.Actions() {
		switch {
		case a.GetVerb() == "get" && a.GetResource().Resource == "recurringjobs":
			gets++
		case a.GetVerb() == "update" && a.GetSubresource() == "status":
			statusWrites++
		case a.GetVerb() == "list" || a.GetVerb() == "watch":
		default:
			t.Errorf("unexpected request %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	if ran != 1 || gets != 0 || statusWrites != 2 {
		t.Fatalf("a run: %d runs, %d GETs of the job, %d status writes; want 1, 0 and 2", ran, gets, statusWrites)
	}
	got, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(ctx, "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Active) != 0 || got.Status.LastSuccessfulTime == nil || got.Status.ExecutionCount != 1 ||
		got.Status.LastScheduleTime == nil || !got.Status.LastScheduleTime.Equal(&metav1.Time{Time: tick}) {
		t.Fatalf("status after the run: %+v", got.Status)
	}
}
