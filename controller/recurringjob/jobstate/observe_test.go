package jobstate

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
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
		lastSkipped *metav1.Time
		wantSkipped bool
	}{
		{"created with skipImmediately", ptr.To(true), false, false, nil, nil, true},
		{"resumed with skipImmediately", ptr.To(true), false, false, ptr.To(true), nil, true},
		{"created, unset, the daemon's default true", nil, true, false, nil, nil, true},
		{"created, unset, the daemon's default false", nil, false, false, nil, nil, false},
		{"resumed with skipImmediately false", ptr.To(false), true, false, ptr.To(true), nil, false},
		{"suspended: nothing to skip", ptr.To(true), false, true, ptr.To(false), nil, false},
		{"a later skip already recorded is kept", ptr.To(true), false, false, ptr.To(true), &metav1.Time{Time: now.Add(time.Minute)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &longhorn.RecurringJob{
				Spec:   longhorn.RecurringJobSpec{Cron: "0 3 * * *", Suspend: tc.suspend, SkipImmediately: tc.skip},
				Status: longhorn.RecurringJobStatus{ObservedSuspend: tc.observed, LastSkipped: tc.lastSkipped},
			}
			if SuspendObserved(job) {
				t.Fatal("the case's suspend counts as observed already")
			}
			if st := State(job, false); !st.SkipImmediately {
				t.Fatal("before the observation, the decision does not wait for it")
			}
			updated := job.DeepCopy()
			skipped := ObserveSuspend(job, &updated.Status, now, tc.def)
			if skipped != tc.wantSkipped {
				t.Fatalf("skipped %v, want %v", skipped, tc.wantSkipped)
			}
			if !SuspendObserved(updated) {
				t.Fatalf("observedSuspend %v, spec.suspend %v: not recorded", updated.Status.ObservedSuspend, updated.Spec.Suspend)
			}
			if got := updated.Status.LastSkipped != nil && updated.Status.LastSkipped.Time.Equal(now); got != tc.wantSkipped {
				t.Fatalf("lastSkipped %v, want skipped at now: %v", updated.Status.LastSkipped, tc.wantSkipped)
			}
			if !tc.wantSkipped && !SameTime(updated.Status.LastSkipped, tc.lastSkipped) {
				t.Fatalf("lastSkipped moved to %v without a skip", updated.Status.LastSkipped)
			}
			if (updated.Spec.SkipImmediately == nil) != (tc.skip == nil) || (tc.skip != nil && *updated.Spec.SkipImmediately != *tc.skip) {
				t.Fatalf("spec.skipImmediately written: %v, was %v", updated.Spec.SkipImmediately, tc.skip)
			}
			if st := State(updated, false); st.SkipImmediately {
				t.Fatal("once observed, the decision still waits for a skip")
			}
		})
	}
}
