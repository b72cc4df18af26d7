//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestACronJobTheManagerDidNotMakeIsLeftAlone: a user's CronJob that has
// a recurring job's name is not the manager's: neither a job that turns
// invalid nor its deletion deletes it.
func TestACronJobTheManagerDidNotMakeIsLeftAlone(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	ctx := context.Background()
	mine, err := e.Kube.BatchV1().CronJobs(e.NS).Create(ctx, &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.CreateJob(t, "nightly", longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 1 * * *", Retain: 2, Concurrency: 1})
	framework.Eventually(t, 15*time.Second, "Ready=False saying the CronJob name is taken", func() (bool, error) {
		c := e.ReadyCondition(t, "nightly")
		return c.Status == longhorn.ConditionStatusFalse && c.Reason == longhorn.RecurringJobConditionReasonCronJobNameTaken &&
			strings.Contains(c.Message, "did not make"), nil
	})
	// Invalid now: the controller removes what would run it, but only
	// what it made.
	e.UpdateJob(t, "nightly", func(j *longhorn.RecurringJob) { j.Spec.Retain = 1000 })
	framework.Eventually(t, 15*time.Second, "Ready=False for retain", func() (bool, error) {
		return e.ReadyCondition(t, "nightly").Status == longhorn.ConditionStatusFalse, nil
	})
	stillMine := func(when string) {
		t.Helper()
		cj, err := e.Kube.BatchV1().CronJobs(e.NS).Get(ctx, "nightly", metav1.GetOptions{})
		if err != nil || cj.UID != mine.UID || cj.Spec.Schedule != "0 3 * * *" {
			t.Fatalf("%s: the user's CronJob is gone or changed (%v)", when, err)
		}
	}
	stillMine("after the job turned invalid")

	if err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Delete(ctx, "nightly", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 15*time.Second, "the recurring job deleted", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(ctx, "nightly", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	stillMine("after the recurring job was deleted")
}

// TestACronWithSurroundingWhitespaceIsScheduled: validation trims the
// expression (a YAML block scalar ends it with a newline); the CronJob
// gets the trimmed one, which the apiserver takes.
func TestACronWithSurroundingWhitespaceIsScheduled(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	e.CreateJob(t, "padded", longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: " @daily\n", Retain: 2, Concurrency: 1})
	e.WaitCronJob(t, "padded", "a CronJob with the trimmed schedule", func(cj *batchv1.CronJob) bool { return cj.Spec.Schedule == "@daily" })
	framework.Eventually(t, 10*time.Second, "Ready=True", func() (bool, error) {
		return e.ReadyCondition(t, "padded").Status == longhorn.ConditionStatusTrue, nil
	})
}
