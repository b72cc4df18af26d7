package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// TestRecurringJobCreateAndUpdateMapEveryField: a create and an update
// that carry the same fields give the same spec (one mapping of the input
// serves both), and a create leaving out concurrency gets the default.
func TestRecurringJobCreateAndUpdateMapEveryField(t *testing.T) {
	s := newTestServer(t)
	fields := `"cron":"30 2 * * *","retain":4,"concurrency":3,"groups":["gold"],"labels":{"team":"db"},` +
		`"suspend":true,"timeZone":"Europe/Paris","startingDeadlineSeconds":120,"skipImmediately":true`
	if code, _, body := s.do(t, "POST", "/v1/recurringjobs", `{"name":"made","task":"backup",`+fields+`}`); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, _, body := s.do(t, "POST", "/v1/recurringjobs", `{"name":"changed","task":"backup","cron":"@daily","retain":1}`); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	get := func(name string) *longhorn.RecurringJob {
		job, err := s.lh.LonghornV1beta2().RecurringJobs(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return job
	}
	if c := get("changed").Spec.Concurrency; c != defaultConcurrency {
		t.Fatalf("a create without concurrency got %d, want the default %d", c, defaultConcurrency)
	}
	eventually(t, "the cache holds the job", func() bool {
		code, _, _ := s.do(t, "GET", "/v1/recurringjobs/changed", "")
		return code == 200
	})
	if code, _, body := s.do(t, "PUT", "/v1/recurringjobs/changed", `{`+fields+`}`); code != 200 {
		t.Fatalf("update: %d %s", code, body)
	}
	mj, cj := get("made"), get("changed")
	cj.Spec.Name = mj.Spec.Name
	if !equality.Semantic.DeepEqual(mj.Spec, cj.Spec) {
		t.Fatalf("create and update of the same fields differ:\ncreate %+v\nupdate %+v", mj.Spec, cj.Spec)
	}
	if !mj.Spec.Suspend || mj.Spec.TimeZone != "Europe/Paris" || mj.Spec.StartingDeadlineSeconds == nil || *mj.Spec.StartingDeadlineSeconds != 120 ||
		mj.Spec.SkipImmediately == nil || !*mj.Spec.SkipImmediately || mj.Spec.Concurrency != 3 || mj.Spec.Retain != 4 {
		t.Fatalf("create lost a field: %+v", mj.Spec)
	}
}

// A job the cache does not show yet (created a moment ago, elsewhere) is
// read from the apiserver before GET answers 404: the CSI driver asks so
// before it refuses a StorageClass naming the job.
func TestGetRecurringJobReadsTheAPIOnACacheMiss(t *testing.T) {
	job := &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: testNamespace},
		Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 1, Concurrency: 1}}
	// The informer's list finds nothing: the cache is behind.
	s := newTestServerWith(t, func(lh *lhfake.Clientset) {
		lh.PrependReactor("list", "recurringjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, &longhorn.RecurringJobList{}, nil
		})
	}, job)
	h := s.handler
	for path, want := range map[string]int{"/v1/recurringjobs/new": http.StatusOK, "/v1/recurringjobs/missing": http.StatusNotFound} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
}
