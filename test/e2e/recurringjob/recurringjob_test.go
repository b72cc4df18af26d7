//go:build e2e

package recurringjob

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	jobcontroller "github.com/cadence-storage/longhorn-manager/controller/recurringjob"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

func newManagerEnv(t *testing.T) *framework.ManagerEnv {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())
	return &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}
}

func TestRecurringJobGetsExactlyOneCronJob(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	job := e.CreateJob(t, "hourly-snap", longhorn.RecurringJobSpec{
		Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 3, Concurrency: 5, Groups: []string{"gold"},
	})
	cj := e.WaitCronJob(t, "hourly-snap", "CronJob created", func(*batchv1.CronJob) bool { return true })

	if cj.Labels[types.RecurringJobLabel] != "hourly-snap" || cj.Labels[types.LabelManagedBy] != types.ManagedByValue {
		t.Errorf("labels %v", cj.Labels)
	}
	if len(cj.OwnerReferences) != 1 || cj.OwnerReferences[0].UID != job.UID || cj.OwnerReferences[0].Kind != "RecurringJob" ||
		cj.OwnerReferences[0].Controller == nil || !*cj.OwnerReferences[0].Controller {
		t.Errorf("owner references %+v", cj.OwnerReferences)
	}
	s := cj.Spec
	if s.Schedule != "0 * * * *" || s.ConcurrencyPolicy != batchv1.ForbidConcurrent || s.TimeZone == nil || *s.TimeZone != "Etc/UTC" {
		t.Errorf("schedule %q, policy %s, zone %v", s.Schedule, s.ConcurrencyPolicy, s.TimeZone)
	}
	if *s.SuccessfulJobsHistoryLimit != 1 || *s.FailedJobsHistoryLimit != 1 {
		t.Errorf("history limits %d/%d, want the settings' 1/1", *s.SuccessfulJobsHistoryLimit, *s.FailedJobsHistoryLimit)
	}
	if s.JobTemplate.Spec.BackoffLimit == nil || *s.JobTemplate.Spec.BackoffLimit > 1 {
		t.Errorf("backoffLimit %v, want at most 1", s.JobTemplate.Spec.BackoffLimit)
	}
	pod := s.JobTemplate.Spec.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyOnFailure || pod.ServiceAccountName != framework.ServiceAccount || len(pod.Containers) != 1 {
		t.Fatalf("pod spec %+v", pod)
	}
	c := pod.Containers[0]
	wantCmd := []string{"longhorn-manager", "-d", "recurring-job", "hourly-snap", "--manager-url", "http://longhorn-backend:9500/v1"}
	if c.Image != "longhorn-manager:test" || !slices.Equal(c.Command, wantCmd) {
		t.Errorf("container image %q command %q", c.Image, c.Command)
	}
	if len(c.Env) != 2 || c.Env[0].Name != "POD_NAMESPACE" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.namespace" ||
		c.Env[1].Name != "JOB_NAME" {
		t.Errorf("env %+v", c.Env)
	}
	framework.Eventually(t, 10*time.Second, "job Ready with the finalizer", func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "hourly-snap", metav1.GetOptions{})
		return err == nil && slices.Contains(j.Finalizers, types.LonghornFinalizer) &&
			e.ReadyCondition(t, "hourly-snap").Status == longhorn.ConditionStatusTrue, nil
	})

	// An unchanged job causes no write, even when every job is re-enqueued
	// by a settings change that does not concern it.
	before := e.WaitCronJob(t, "hourly-snap", "CronJob", func(*batchv1.CronJob) bool { return true }).ResourceVersion
	e.SetSetting(t, types.SettingNameBackupTarget, "nfs://server:/backups")
	time.Sleep(2 * time.Second)
	if after := e.WaitCronJob(t, "hourly-snap", "CronJob", func(*batchv1.CronJob) bool { return true }).ResourceVersion; after != before {
		t.Errorf("an unchanged job rewrote its CronJob (resourceVersion %s -> %s)", before, after)
	}

	e.UpdateJob(t, "hourly-snap", func(j *longhorn.RecurringJob) { j.Spec.Cron = "*/15 * * * *" })
	e.WaitCronJob(t, "hourly-snap", "schedule follows cron", func(cj *batchv1.CronJob) bool { return cj.Spec.Schedule == "*/15 * * * *" })

	e.UpdateJob(t, "hourly-snap", func(j *longhorn.RecurringJob) { j.Spec.Concurrency = 7 })
	e.WaitCronJob(t, "hourly-snap", "CronJob records the new concurrency", func(cj *batchv1.CronJob) bool {
		return strings.Contains(cj.Annotations["recurring-job.longhorn.io/spec"], `"concurrency":7`)
	})

	e.SetSetting(t, types.SettingNameRecurringSuccessfulJobsHistoryLimit, "4")
	e.WaitCronJob(t, "hourly-snap", "history limit follows the setting", func(cj *batchv1.CronJob) bool {
		return *cj.Spec.SuccessfulJobsHistoryLimit == 4
	})

	// A manual edit is reverted.
	err := datastore.RetryOnConflict(func() error {
		live, err := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "hourly-snap", metav1.GetOptions{})
		if err != nil {
			return err
		}
		live.Spec.Schedule = "0 0 1 1 *"
		live.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
		live.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil:latest"
		_, err = e.Kube.BatchV1().CronJobs(e.NS).Update(context.Background(), live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitCronJob(t, "hourly-snap", "manual edit reverted", func(cj *batchv1.CronJob) bool {
		return cj.Spec.Schedule == "*/15 * * * *" && cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent &&
			cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image == "longhorn-manager:test"
	})

	// A deleted CronJob comes back.
	if err := e.Kube.BatchV1().CronJobs(e.NS).Delete(context.Background(), "hourly-snap", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitCronJob(t, "hourly-snap", "deleted CronJob recreated", func(cj *batchv1.CronJob) bool { return cj.DeletionTimestamp == nil })
}

const (
	defaultGroupLabel = "recurring-job-group.longhorn.io/default"
)

func TestDeletingARecurringJobRemovesItsCronJobAndLabels(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	e.CreateJob(t, "job-a", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 1, Groups: []string{"shared", "only-a"}})
	e.CreateJob(t, "job-b", longhorn.RecurringJobSpec{Task: "backup", Cron: "@daily", Retain: 1, Groups: []string{"shared"}})
	e.CreateVolume(t, "by-job", map[string]string{"recurring-job.longhorn.io/job-a": "enabled"})
	e.CreateVolume(t, "by-shared", map[string]string{"recurring-job-group.longhorn.io/shared": "enabled"})
	e.CreateVolume(t, "by-only-a", map[string]string{"recurring-job-group.longhorn.io/only-a": "enabled", "recurring-job.longhorn.io/job-b": "enabled"})
	e.WaitCronJob(t, "job-a", "CronJob of a", func(*batchv1.CronJob) bool { return true })
	framework.Eventually(t, 10*time.Second, "finalizer on a", func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "job-a", metav1.GetOptions{})
		return err == nil && slices.Contains(j.Finalizers, types.LonghornFinalizer), nil
	})

	if err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Delete(context.Background(), "job-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 15*time.Second, "job a and its CronJob gone", func() (bool, error) {
		_, errJob := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "job-a", metav1.GetOptions{})
		_, errCron := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "job-a", metav1.GetOptions{})
		return apierrors.IsNotFound(errJob) && apierrors.IsNotFound(errCron), nil
	})

	// The job label is gone, and a volume left with nothing joins the default group.
	if l := e.VolumeLabels(t, "by-job"); l["recurring-job.longhorn.io/job-a"] != "" || l[defaultGroupLabel] != "enabled" {
		t.Errorf("by-job labels %v", l)
	}
	// Job b still lists the shared group, so its label stays.
	if l := e.VolumeLabels(t, "by-shared"); l["recurring-job-group.longhorn.io/shared"] != "enabled" || l[defaultGroupLabel] != "" {
		t.Errorf("by-shared labels %v", l)
	}
	// No other job lists only-a, so its label goes; the volume still has job b.
	if l := e.VolumeLabels(t, "by-only-a"); l["recurring-job-group.longhorn.io/only-a"] != "" || l["recurring-job.longhorn.io/job-b"] != "enabled" || l[defaultGroupLabel] != "" {
		t.Errorf("by-only-a labels %v", l)
	}
	if _, err := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "job-b", metav1.GetOptions{}); err != nil {
		t.Errorf("job b's CronJob: %v", err)
	}
}

func TestDefaultGroupLabelComesAndGoes(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	e.CreateVolume(t, "plain", nil)
	e.WaitVolumeLabels(t, "plain", "a volume without labels joins the default group", func(l map[string]string) bool {
		return l[defaultGroupLabel] == "enabled"
	})

	setLabels := func(change func(map[string]string)) {
		err := datastore.RetryOnConflict(func() error {
			v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "plain", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(v.Labels)
			_, err = e.LH.LonghornV1beta2().Volumes(e.NS).Update(context.Background(), v, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setLabels(func(l map[string]string) { l["recurring-job.longhorn.io/nightly"] = "enabled" })
	e.WaitVolumeLabels(t, "plain", "the default group goes once the volume selects a job", func(l map[string]string) bool {
		return l[defaultGroupLabel] == "" && l["recurring-job.longhorn.io/nightly"] == "enabled"
	})
	setLabels(func(l map[string]string) { delete(l, "recurring-job.longhorn.io/nightly") })
	e.WaitVolumeLabels(t, "plain", "the default group comes back when the volume selects nothing", func(l map[string]string) bool {
		return l[defaultGroupLabel] == "enabled"
	})
}

func TestInvalidRecurringJobFromKubectlIsNotScheduled(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	manifest := `apiVersion: longhorn.io/v1beta2
kind: RecurringJob
metadata:
  name: never
spec:
  task: snapshot
  cron: "0 0 30 2 *"
  retain: 2
`
	e.Cluster.Kubectl(t, manifest, "-n", e.NS, "apply", "-f", "-")
	framework.Eventually(t, 10*time.Second, "Ready=False naming the rule", func() (bool, error) {
		c := e.ReadyCondition(t, "never")
		return c.Status == longhorn.ConditionStatusFalse && c.Reason == longhorn.RecurringJobConditionReasonInvalidSpec &&
			strings.Contains(c.Message, "spec.cron") && strings.Contains(c.Message, "never fires"), nil
	})
	framework.Eventually(t, 10*time.Second, "a Warning event", func() (bool, error) {
		events, err := e.Kube.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == "never" && ev.Type == corev1.EventTypeWarning && ev.Reason == "InvalidSpec" {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "never", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("an invalid job has a CronJob (err %v)", err)
	}

	// Retain beyond the max-retention setting is refused the same way, and
	// a fix schedules the job.
	e.UpdateJob(t, "never", func(j *longhorn.RecurringJob) { j.Spec.Cron = "0 0 1 * *"; j.Spec.Retain = 101 })
	framework.Eventually(t, 10*time.Second, "Ready=False for retain", func() (bool, error) {
		c := e.ReadyCondition(t, "never")
		return c.Status == longhorn.ConditionStatusFalse && strings.Contains(c.Message, "spec.retain"), nil
	})
	e.UpdateJob(t, "never", func(j *longhorn.RecurringJob) { j.Spec.Retain = 100 })
	e.WaitCronJob(t, "never", "CronJob once the job is valid", func(cj *batchv1.CronJob) bool { return cj.Spec.Schedule == "0 0 1 * *" })
	framework.Eventually(t, 10*time.Second, "Ready=True", func() (bool, error) {
		return e.ReadyCondition(t, "never").Status == longhorn.ConditionStatusTrue, nil
	})

	// Lowering the setting does not stop a job accepted before: it keeps
	// its CronJob (and its retain), and its Ready condition says why it
	// breaks the setting, with a Warning event.
	e.SetSetting(t, types.SettingNameRecurringJobMaxRetention, "50")
	framework.Eventually(t, 10*time.Second, "Ready=True, RetainAboveMaximum, once the setting is lowered", func() (bool, error) {
		c := e.ReadyCondition(t, "never")
		return c.Status == longhorn.ConditionStatusTrue && c.Reason == longhorn.RecurringJobConditionReasonRetainAboveMaximum &&
			strings.Contains(c.Message, "spec.retain 100") && strings.Contains(c.Message, "(50)"), nil
	})
	e.WaitCronJob(t, "never", "the CronJob kept", func(*batchv1.CronJob) bool { return true })
	framework.Eventually(t, 10*time.Second, "a RetainAboveMaximum Warning event", func() (bool, error) {
		events, err := e.Kube.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == "never" && ev.Type == corev1.EventTypeWarning && ev.Reason == longhorn.RecurringJobConditionReasonRetainAboveMaximum {
				return true, nil
			}
		}
		return false, nil
	})

	// A new spec is checked against the setting as it is now: invalid,
	// and its CronJob goes.
	e.UpdateJob(t, "never", func(j *longhorn.RecurringJob) { j.Spec.Cron = "0 0 2 * *" })
	framework.Eventually(t, 10*time.Second, "CronJob removed when a new spec breaks the setting", func() (bool, error) {
		_, err := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "never", metav1.GetOptions{})
		c := e.ReadyCondition(t, "never")
		return apierrors.IsNotFound(err) && c.Status == longhorn.ConditionStatusFalse && strings.Contains(c.Message, "spec.retain"), nil
	})
}

func TestEveryMinuteJobProducesAJobRunningTheRecurringJobCommand(t *testing.T) {
	t.Parallel()
	e := newManagerEnv(t)
	e.CreateJob(t, "minutely", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "* * * * *", Retain: 1})
	var job batchv1.Job
	framework.Eventually(t, 90*time.Second, "a Job from the CronJob", func() (bool, error) {
		jobs, err := e.Kube.BatchV1().Jobs(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		job = jobs.Items[0]
		return true, nil
	})
	want := []string{"longhorn-manager", "-d", "recurring-job", "minutely", "--manager-url", "http://longhorn-backend:9500/v1"}
	if got := job.Spec.Template.Spec.Containers[0].Command; !slices.Equal(got, want) {
		t.Fatalf("Job %s runs %q, want %q", job.Name, got, want)
	}
	if job.Labels[types.RecurringJobLabel] != "minutely" {
		t.Errorf("Job labels %v", job.Labels)
	}
	// The job's status mirrors the CronJob: the tick, one execution, and
	// the Job as the active run (no kubelet runs its pod here).
	tick, ok := jobcontroller.TickFromJobName("minutely", job.Name)
	if !ok {
		t.Fatalf("Job name %s carries no tick", job.Name)
	}
	framework.Eventually(t, 20*time.Second, "status mirrors the CronJob", func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "minutely", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := j.Status
		return st.LastScheduleTime != nil && st.LastScheduleTime.Time.Equal(tick) && st.ExecutionCount >= 1 &&
			len(st.Active) >= 1 && st.Active[0].Runner == longhorn.RecurringJobRunnerCronJob && st.Active[0].Name == job.Name &&
			st.Active[0].ScheduledTime.Time.Equal(tick) && st.NextScheduleTime != nil && st.NextScheduleTime.After(tick) &&
			st.ObservedSchedule != nil && st.ObservedSchedule.Cron == "* * * * *", nil
	})
}
