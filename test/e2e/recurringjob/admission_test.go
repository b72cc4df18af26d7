//go:build e2e

package recurringjob

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestANewRecurringJobIsTakenInWithOneWriteOfEachWriter: in the
// manager's namespace, labelled as package/namespace.yaml labels
// longhorn-system, the apiserver gives a new RecurringJob Longhorn's
// finalizer (package/components/mutating-policies/admission.yaml), and the manager takes the job in
// with one status write of each of its two writers: the controller's
// (owner, schedule, Ready) and the manager runner's (observed suspend,
// next tick). In a namespace without the label the job is created as
// written and the controller adds the finalizer itself: one write more.
func TestANewRecurringJobIsTakenInWithOneWriteOfEachWriter(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	for _, c := range []struct {
		name              string
		ns                string
		finalizedAtCreate bool
		writes            int
	}{
		{"manager namespace", cluster.NewNamespace(t), true, 2},
		{"unlabelled namespace", cluster.NewPlainNamespace(t), false, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, _ := framework.NewRunnerEnvIn(t, c.ns)
			jobs := e.LH.LonghornV1beta2().RecurringJobs(e.NS)
			// Another finalizer of the user's is kept beside Longhorn's.
			spec := longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 0 1 1 *", Retain: 1, Concurrency: 1}
			created, err := jobs.Create(context.Background(), &longhorn.RecurringJob{
				ObjectMeta: metav1.ObjectMeta{Name: "daily", Finalizers: []string{"example.com/keep"}},
				Spec:       spec,
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if kit.HasFinalizer(created) != c.finalizedAtCreate {
				t.Fatalf("created with finalizers %v; Longhorn's added at creation: want %v", created.Finalizers, c.finalizedAtCreate)
			}

			writes, job := framework.WritesUntil(t, jobs, created, "Ready with its next tick", func(j *longhorn.RecurringJob) bool {
				return kit.GetCondition(j.Status.Conditions, longhorn.ConditionTypeReady).Status == longhorn.ConditionStatusTrue &&
					j.Status.NextScheduleTime != nil
			})
			if !kit.HasFinalizer(job) || !slices.Contains(job.Finalizers, "example.com/keep") {
				t.Errorf("taken in with finalizers %v", job.Finalizers)
			}
			if job.Status.ObservedSuspend == nil || *job.Status.ObservedSuspend {
				t.Errorf("taken in with observedSuspend %v", job.Status.ObservedSuspend)
			}
			if writes != c.writes {
				t.Errorf("taken in with %d writes, want %d", writes, c.writes)
			}

			// Deleting it lets it go once the manager has cleaned up
			// and the user removed their own finalizer.
			if err := jobs.Delete(context.Background(), "daily", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			e.WaitJob(t, "daily", "the manager's finalizer released", 30*time.Second, func(j *longhorn.RecurringJob) bool {
				return !kit.HasFinalizer(j)
			})
			e.UpdateJob(t, "daily", func(j *longhorn.RecurringJob) { j.Finalizers = nil })
			framework.Eventually(t, 30*time.Second, "the job gone", func() (bool, error) {
				_, err := jobs.Get(context.Background(), "daily", metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
		})
	}
}
