package crds_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// The manager relies on owner-reference cascades from its custom
// resources: the control plane's garbage collector must know the CRDs.
func TestForegroundDeletionCascadesFromACustomResource(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	// No manager runs here to release Longhorn's finalizer, which the
	// manager namespace's admission policy would add.
	ns := cluster.NewPlainNamespace(t)
	ctx := context.Background()
	jobs := client(t).LonghornV1beta2().RecurringJobs(ns)
	job, err := jobs.Create(ctx, recurringJob("owner", longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 1}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube := cluster.KubeClient(t)
	controller := true
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "child",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "longhorn.io/v1beta2", Kind: "RecurringJob", Name: job.Name, UID: job.UID,
			Controller: &controller, BlockOwnerDeletion: &controller,
		}},
	}}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foreground := metav1.DeletePropagationForeground
	if err := jobs.Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &foreground}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		_, errJob := jobs.Get(ctx, job.Name, metav1.GetOptions{})
		_, errChild := kube.CoreV1().ConfigMaps(ns).Get(ctx, "child", metav1.GetOptions{})
		return apierrors.IsNotFound(errJob) && apierrors.IsNotFound(errChild), nil
	})
	if err != nil {
		t.Fatalf("the owner and its child were not both deleted: %v", err)
	}
}

// The CronJob and Job controllers run, so a CronJob really creates Jobs.
func TestCronJobCreatesJobs(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	ctx := context.Background()
	kube := cluster.KubeClient(t)
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Name: "every-minute"},
		Spec: batchv1.CronJobSpec{
			Schedule: "* * * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers:    []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}},
			}}}},
		},
	}
	if _, err := kube.BatchV1().CronJobs(ns).Create(ctx, cron, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		jobs, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(jobs.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("no Job within 90s of a * * * * * CronJob: %v", err)
	}
}
