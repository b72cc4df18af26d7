package managerrunner

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A run fired while other due jobs wait in the queue begins its work only
// once they are fired: the fires' status writes go first.
func TestARunWaitsWhileDueJobsWaitToBeFired(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "ns"}})
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	ds := datastore.New("ns", lh, kube, inf)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	waiting := make(chan int, 1)
	var base *kit.Base
	r := New(logrus.NewEntry(log), nil, nil, ds, inf, record.NewFakeRecorder(10), clk, Config{Identity: "node-1"},
		func(context.Context, string, time.Time) (*types.RecurringJobRunVolumes, error) {
			waiting <- base.Queue.Len()
			return nil, nil
		})
	base = kit.NewBase("test", logrus.NewEntry(log), nil, func(context.Context, string) (kit.Result, error) { return kit.Result{}, nil })
	defer base.Queue.ShutDown()
	r.mu.Lock()
	r.base = base
	r.mu.Unlock()
	base.Queue.Add("ns/due-1")
	base.Queue.Add("ns/due-2")

	if !r.start(context.Background(), "job", clk.Now(), false, nil) {
		t.Fatal("the run was not started")
	}
	// The workers fire the due jobs, one at a time.
	for range 2 {
		time.Sleep(100 * time.Millisecond)
		key, _ := base.Queue.Get()
		base.Queue.Done(key)
	}
	if n := <-waiting; n != 0 {
		t.Fatalf("the run began while %d due jobs waited to be fired", n)
	}
	r.wg.Wait()
}
