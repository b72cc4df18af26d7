package recurringjob

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

var testCronJobConfig = CronJobConfig{ManagerImage: "img:1", ServiceAccount: "sa", ManagerURL: "http://m:9500/v1"}

func testJob() *longhorn.RecurringJob {
	return &longhorn.RecurringJob{
		ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: "ns", UID: "uid-1"},
		Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "0 * * * *", Retain: 2, Concurrency: 10},
	}
}

// asStored mimics what the apiserver adds to a CronJob it stores.
func asStored(cj *batchv1.CronJob) *batchv1.CronJob {
	out := cj.DeepCopy()
	out.ResourceVersion = "7"
	out.Spec.JobTemplate.Spec.Template.Spec.DNSPolicy = corev1.DNSClusterFirst
	out.Spec.JobTemplate.Spec.Template.Spec.SchedulerName = "default-scheduler"
	out.Spec.JobTemplate.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To(int64(30))
	c := &out.Spec.JobTemplate.Spec.Template.Spec.Containers[0]
	c.TerminationMessagePath = "/dev/termination-log"
	c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	return out
}

// withAudience is the test job's CronJob for an API that accepts tokens of
// the audience longhorn-manager only.
func withAudience() *batchv1.CronJob {
	cfg := testCronJobConfig
	cfg.APITokenAudience = "longhorn-manager"
	return desiredCronJob(testJob(), cfg, cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1})
}

// The pods of an API that accepts one audience send a token projected
// with it, and not their default one.
func TestCronJobPodsSendATokenOfTheAPIsAudience(t *testing.T) {
	pod := withAudience().Spec.JobTemplate.Spec.Template.Spec
	if len(pod.Volumes) != 1 || pod.Volumes[0].Projected == nil ||
		pod.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience != "longhorn-manager" {
		t.Fatalf("volumes %+v: no token projected for the API's audience", pod.Volumes)
	}
	c := pod.Containers[0]
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != types.APITokenDir || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if !slices.Contains(c.Command, "--api-token-file") || !slices.Contains(c.Command, types.APITokenPath) {
		t.Errorf("command %q does not send the projected token", c.Command)
	}
	plain := desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{}).Spec.JobTemplate.Spec.Template.Spec
	if len(plain.Volumes) != 0 || slices.Contains(plain.Containers[0].Command, "--api-token-file") {
		t.Errorf("with no audience the pods get a token volume: %+v %q", plain.Volumes, plain.Containers[0].Command)
	}
}

// Pods that call the API at an https:// URL mount the internal CA's
// certificates and check the API's certificate with them; over http they
// mount nothing of it.
func TestCronJobPodsOfATLSAPIMountTheCACertificates(t *testing.T) {
	cfg := testCronJobConfig
	cfg.ManagerURL = "https://longhorn-backend:9500/v1"
	cfg.APITokenAudience = "longhorn-manager"
	pod := desiredCronJob(testJob(), cfg, cronJobSettings{}).Spec.JobTemplate.Spec.Template.Spec
	if len(pod.Volumes) != 2 || pod.Volumes[1].ConfigMap == nil || pod.Volumes[1].ConfigMap.Name != "longhorn-internal-ca-cert" {
		t.Fatalf("volumes %+v: no ConfigMap of the CA's certificates", pod.Volumes)
	}
	c := pod.Containers[0]
	if len(c.VolumeMounts) != 2 || c.VolumeMounts[1].MountPath != types.ManagerCADir || !c.VolumeMounts[1].ReadOnly {
		t.Errorf("mounts %+v", c.VolumeMounts)
	}
	if i := slices.Index(c.Command, "--manager-ca-file"); i < 0 || c.Command[i+1] != types.ManagerCAPath {
		t.Errorf("command %q does not check the API with the CA's certificates", c.Command)
	}
	plain := desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{}).Spec.JobTemplate.Spec.Template.Spec
	if len(plain.Volumes) != 0 || slices.Contains(plain.Containers[0].Command, "--manager-ca-file") {
		t.Errorf("an http:// API: the pods mount %+v, run %q", plain.Volumes, plain.Containers[0].Command)
	}
}

func TestMergeCronJob(t *testing.T) {
	desired := desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1})
	cases := []struct {
		name        string
		live        func() *batchv1.CronJob
		desired     *batchv1.CronJob
		wantChanged bool
	}{
		{"fields the apiserver defaulted cause no write", func() *batchv1.CronJob { return asStored(desired) }, desired, false},
		{"labels added by others are kept without a write", func() *batchv1.CronJob {
			l := asStored(desired)
			l.Labels["team"] = "storage"
			return l
		}, desired, false},
		{"an edited schedule is reverted", func() *batchv1.CronJob {
			l := asStored(desired)
			l.Spec.Schedule = "* * * * *"
			return l
		}, desired, true},
		{"an edited image is reverted", func() *batchv1.CronJob {
			l := asStored(desired)
			l.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "other"
			return l
		}, desired, true},
		{"an added container is removed", func() *batchv1.CronJob {
			l := asStored(desired)
			l.Spec.JobTemplate.Spec.Template.Spec.Containers = append(l.Spec.JobTemplate.Spec.Template.Spec.Containers, corev1.Container{Name: "x"})
			return l
		}, desired, true},
		{"a suspended CronJob is resumed", func() *batchv1.CronJob {
			l := asStored(desired)
			l.Spec.Suspend = ptr.To(true)
			return l
		}, desired, true},
		{"a new history limit is applied", func() *batchv1.CronJob { return asStored(desired) }, desiredCronJob(testJob(), testCronJobConfig, cronJobSettings{SuccessfulHistory: 3, FailedHistory: 1}), true},
		{"the API's token audience, once set, adds the projected token", func() *batchv1.CronJob { return asStored(desired) }, withAudience(), true},
		{"a projected token as the apiserver stores it causes no write", func() *batchv1.CronJob { return asStored(withAudience()) }, withAudience(), false},
		{"the projected token goes when the audience is unset", func() *batchv1.CronJob { return asStored(withAudience()) }, desired, true},
		{"a new concurrency changes the recorded spec", func() *batchv1.CronJob { return asStored(desired) }, func() *batchv1.CronJob {
			j := testJob()
			j.Spec.Concurrency = 3
			return desiredCronJob(j, testCronJobConfig, cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1})
		}(), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			live := c.live()
			merged, changed := mergeCronJob(live, c.desired)
			if changed != c.wantChanged {
				t.Fatalf("changed = %v, want %v", changed, c.wantChanged)
			}
			if again, changedAgain := mergeCronJob(asStored(merged), c.desired); changedAgain {
				t.Fatalf("merging twice is not stable: %+v", again.Spec)
			}
			if merged.ResourceVersion != live.ResourceVersion {
				t.Fatal("the merge must keep the live resource version for the update")
			}
		})
	}
}
