package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/manager"
)

const testNamespace = "longhorn-system"

// testServer is the API on fake clientsets, for unit tests, fuzzing and
// benchmarks of the handlers; the integration tests in app/ drive the
// real thing.
type testServer struct {
	handler http.Handler
	lh      *lhfake.Clientset
	server  *Server
}

func newTestServer(tb testing.TB, objects ...runtime.Object) *testServer {
	tb.Helper()
	return newTestServerWith(tb, nil, objects...)
}

// newTestServerWith is newTestServer with prepare run on the Longhorn
// clientset before the informers start (to add reactors).
func newTestServerWith(tb testing.TB, prepare func(*lhfake.Clientset), objects ...runtime.Object) *testServer {
	tb.Helper()
	lh := lhfake.NewSimpleClientset(objects...)
	if prepare != nil {
		prepare(lh)
	}
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, testNamespace, 0)
	ds := datastore.New(testNamespace, lh, kube, inf)
	logger := logrus.New()
	logger.SetLevel(logrus.PanicLevel)
	s := NewServer(logrus.NewEntry(logger), ds, inf, manager.NewVolumeManager(ds), clock.RealClock{}, prometheus.NewRegistry())
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(func() { cancel(); inf.Shutdown() })
	inf.Start(ctx.Done())
	if err := ds.WaitForCacheSync(ctx); err != nil {
		tb.Fatal(err)
	}
	return &testServer{handler: s.Router(func() (bool, string) { return true, "" }), lh: lh, server: s}
}

func testJobs(n int) []runtime.Object {
	out := make([]runtime.Object, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("job-%04d", i), Namespace: testNamespace},
			Spec: longhorn.RecurringJobSpec{
				Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 5, Concurrency: 10,
				Groups: []string{"default", "gold"}, Labels: map[string]string{"team": "storage"},
			},
		})
	}
	return out
}
