//go:build e2e

package recurringjob

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestMetricsOfCronJobRuns: on the CronJob runner the runs are Kubernetes
// Jobs, and what the manager knows of them is what it mirrors from the
// CronJob's status. The test cluster runs no pods, so the test writes the
// CronJob status the CronJob controller writes as its Jobs start and end:
// a run that succeeds, one that fails, and one that started and ended
// between two looks of the mirror; the counters follow. Then a run of the
// recurring-job command, what the Job's pod runs, records its volumes on
// the job, and the volume series follow.
func TestMetricsOfCronJobRuns(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	// 03:00 on February 29: Kubernetes fires nothing during the test.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"snapshot","cron":"0 3 29 2 *","retain":2}`).Expect(t, 200)
	e.WaitCronJob(t, "nightly", "the job's CronJob", func(*batchv1.CronJob) bool { return true })
	ctx := context.Background()
	first := time.Now().UTC().Truncate(time.Minute).Add(-3 * time.Minute)

	// k8sJob makes the Job of a tick, suspended (no pod), as the CronJob
	// controller names it; the CronJob controller keeps an active Job
	// that exists.
	k8sJob := func(tick time.Time) corev1.ObjectReference {
		name := fmt.Sprintf("nightly-%d", tick.Unix()/60)
		j, err := e.Kube.BatchV1().Jobs(e.NS).Create(ctx, &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "run", Image: "longhorn-manager"}},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: e.NS, Name: name, UID: j.UID}
	}
	cronStatus := func(change func(*batchv1.CronJobStatus)) {
		t.Helper()
		err := datastore.RetryOnConflict(func() error {
			cj, err := e.Kube.BatchV1().CronJobs(e.NS).Get(ctx, "nightly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(&cj.Status)
			_, err = e.Kube.BatchV1().CronJobs(e.NS).UpdateStatus(ctx, cj, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	waitMirrored := func(what string, cond func(longhorn.RecurringJobStatus) bool) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, what, func() (bool, error) {
			j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(ctx, "nightly", metav1.GetOptions{})
			return err == nil && cond(j.Status), err
		})
	}
	expect := func(what string, want map[string]float64) {
		t.Helper()
		framework.EventuallyAgree(t, 30*time.Second, what, func() string { return framework.ExpectSeries(e.ScrapeMetrics(t), want) })
	}
	runs := func(result string) string {
		return framework.Series("longhorn_recurring_job_runs_finished_total", "recurring_job", "nightly", "result", result)
	}
	failed := framework.Series("longhorn_recurring_job_last_run_failed", "recurring_job", "nightly")
	started := framework.Series("longhorn_recurring_job_runs_started_total", "recurring_job", "nightly")

	// A run starts, then succeeds.
	ref := k8sJob(first)
	cronStatus(func(s *batchv1.CronJobStatus) {
		s.LastScheduleTime, s.Active = &metav1.Time{Time: first}, []corev1.ObjectReference{ref}
	})
	waitMirrored("the first run active", func(s longhorn.RecurringJobStatus) bool { return len(s.Active) == 1 && s.ExecutionCount == 1 })
	expect("a run in progress counts as started, not finished", map[string]float64{started: 1, runs("succeeded"): 0, runs("failed"): 0, failed: 0})
	cronStatus(func(s *batchv1.CronJobStatus) {
		s.Active, s.LastSuccessfulTime = nil, &metav1.Time{Time: first.Add(30 * time.Second)}
	})
	waitMirrored("the first run ended", func(s longhorn.RecurringJobStatus) bool { return len(s.Active) == 0 && s.LastSuccessfulTime != nil })
	expect("the first run succeeded", map[string]float64{
		runs("succeeded"): 1, runs("failed"): 0, failed: 0,
		framework.Series("longhorn_recurring_job_run_duration_seconds_count", "recurring_job", "nightly"): 1,
	})

	// The next run ends without a success: its Job failed.
	second := first.Add(time.Minute)
	ref = k8sJob(second)
	cronStatus(func(s *batchv1.CronJobStatus) {
		s.LastScheduleTime, s.Active = &metav1.Time{Time: second}, []corev1.ObjectReference{ref}
	})
	waitMirrored("the second run active", func(s longhorn.RecurringJobStatus) bool { return len(s.Active) == 1 && s.ExecutionCount == 2 })
	cronStatus(func(s *batchv1.CronJobStatus) { s.Active = nil })
	waitMirrored("the second run ended", func(s longhorn.RecurringJobStatus) bool { return len(s.Active) == 0 })
	expect("the second run failed", map[string]float64{started: 2, runs("succeeded"): 1, runs("failed"): 1, failed: 1})

	// A run that started and succeeded between two looks.
	third := second.Add(time.Minute)
	cronStatus(func(s *batchv1.CronJobStatus) {
		s.LastScheduleTime, s.LastSuccessfulTime = &metav1.Time{Time: third}, &metav1.Time{Time: time.Now().Add(time.Second)}
	})
	waitMirrored("the third run mirrored", func(s longhorn.RecurringJobStatus) bool { return s.ExecutionCount == 3 })
	expect("the third run succeeded", map[string]float64{started: 3, runs("succeeded"): 2, runs("failed"): 1, failed: 0})

	// The pod's run: one volume, snapshotted.
	(&framework.RunnerEnv{APIEnv: e}).AttachedVolume(t, "vol", "nightly")
	fourth := third.Add(time.Minute)
	out, err := exec.Command(framework.ManagerBinary(t), "recurring-job", "nightly", "--manager-url", e.Base+"/v1",
		"--kubeconfig", framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS), "--namespace", e.NS, "--tick", fourth.Format(time.RFC3339)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "succeeded=1 failed=0 skipped=0") {
		t.Fatalf("the pod's run: %v\n%s", err, out)
	}
	volumes := func(name, result string) string {
		return framework.Series(name, "recurring_job", "nightly", "result", result)
	}
	expect("the volumes of the pod's run", map[string]float64{
		volumes("longhorn_recurring_job_last_run_volumes", "succeeded"): 1,
		volumes("longhorn_recurring_job_last_run_volumes", "failed"):    0,
		volumes("longhorn_recurring_job_volumes_total", "succeeded"):    1,
		volumes("longhorn_recurring_job_volumes_total", "failed"):       0,
	})
}
