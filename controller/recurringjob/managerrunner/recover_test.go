package managerrunner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A panic in a run of the manager runner is that run's failure, recorded
// on the job like any other; the manager goes on.
func TestAPanickingRunFailsThatRun(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}})
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	ds := datastore.New("ns", lh, kube, inf)
	recorder := record.NewFakeRecorder(10)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	r := New(logrus.NewEntry(log), nil, nil, ds, inf, recorder, clk, Config{Identity: "node-1"},
		func(context.Context, string, time.Time) (*types.RecurringJobRunVolumes, error) {
			var m map[string]int
			m["x"]++ // a runtime panic, as a bug in a run would be
			return nil, nil
		})
	if !r.start(context.Background(), "job", clk.Now(), false, nil) {
		t.Fatal("the run was not started")
	}
	r.wg.Wait()
	select {
	case e := <-recorder.Events:
		if !strings.Contains(e, EventReasonRunFailed) || !strings.Contains(e, "internal error") {
			t.Fatalf("event %q, want the run failed with an internal error", e)
		}
	default:
		t.Fatal("no event says the run failed")
	}
	job, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if job.Status.LastSuccessfulTime != nil {
		t.Fatalf("a run that panicked was recorded successful at %v", job.Status.LastSuccessfulTime)
	}
}
