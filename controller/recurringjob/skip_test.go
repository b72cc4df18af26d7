package recurringjob

import (
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// TestSkipImmediatelyIsAStandingChoice: the tick due when a job is seen
// created or resumed is skipped when skipImmediately (or the daemon's
// default when unset) says so; the spec is never written, so a manifest
// applied by GitOps stays as written, and the next resume skips again.
func TestSkipImmediatelyIsAStandingChoice(t *testing.T) {
	now := time.Date(2026, 11, 23, 3, 0, 30, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		skip        *bool
		def         bool
		suspend     bool
		observed    *bool
		wantSkipped bool
	}{
		{"created with skipImmediately", ptr.To(true), false, false, nil, true},
		{"resumed with skipImmediately", ptr.To(true), false, false, ptr.To(true), true},
		{"created, unset, the daemon's default true", nil, true, false, nil, true},
		{"created, unset, the daemon's default false", nil, false, false, nil, false},
		{"resumed with skipImmediately false", ptr.To(false), true, false, ptr.To(true), false},
		{"suspended: nothing to skip", ptr.To(true), false, true, ptr.To(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ns", Generation: 4},
				Spec:   longhorn.RecurringJobSpec{Cron: "0 3 * * *", Suspend: tc.suspend, SkipImmediately: tc.skip},
				Status: longhorn.RecurringJobStatus{ObservedSuspend: tc.observed}}
			lh := lhfake.NewSimpleClientset(job)
			kube := kubefake.NewSimpleClientset()
			ds := datastore.New("ns", lh, kube, datastore.NewInformers(lh, kube, "ns", 0))
			c := &Controller{ds: ds, clock: clocktesting.NewFakeClock(now), cfg: CronJobConfig{SkipImmediatelyDefault: tc.def}}
			if suspendObserved(job) {
				t.Fatal("the case's suspend counts as observed already")
			}
			if _, err := c.store(context.Background(), "ns/nightly", job, c.takeIn(job), logrus.NewEntry(logrus.New())); err != nil {
				t.Fatal(err)
			}
			got, err := lh.LonghornV1beta2().RecurringJobs("ns").Get(context.Background(), "nightly", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !suspendObserved(got) {
				t.Fatalf("observedSuspend %v, spec.suspend %v: not recorded", got.Status.ObservedSuspend, got.Spec.Suspend)
			}
			if skipped := got.Status.LastSkipped != nil && got.Status.LastSkipped.Time.Equal(now); skipped != tc.wantSkipped {
				t.Fatalf("lastSkipped %v, want skipped %v", got.Status.LastSkipped, tc.wantSkipped)
			}
			if (got.Spec.SkipImmediately == nil) != (tc.skip == nil) || (tc.skip != nil && *got.Spec.SkipImmediately != *tc.skip) {
				t.Fatalf("spec.skipImmediately written: %v, was %v", got.Spec.SkipImmediately, tc.skip)
			}
			if st := jobState(got, false); st.SkipImmediately {
				t.Fatal("once observed, the runner still waits for a skip decision")
			}
		})
	}
}
