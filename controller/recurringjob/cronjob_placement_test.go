package recurringjob

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/types"
)

var testPlacement = types.PodPlacement{
	Tolerations:       []corev1.Toleration{{Key: "storage", Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoSchedule}},
	NodeSelector:      map[string]string{"disk": "ssd"},
	PriorityClassName: "storage-high",
	RegistrySecret:    "regcred",
}

func placedSettings(p types.PodPlacement) cronJobSettings {
	return cronJobSettings{SuccessfulHistory: 1, FailedHistory: 1, Placement: p}
}

func TestDesiredCronJobCarriesThePodSettings(t *testing.T) {
	pod := desiredCronJob(testJob(), testCronJobConfig, placedSettings(testPlacement)).Spec.JobTemplate.Spec.Template.Spec
	if !reflect.DeepEqual(pod.Tolerations, testPlacement.Tolerations) ||
		!reflect.DeepEqual(pod.NodeSelector, testPlacement.NodeSelector) ||
		pod.PriorityClassName != "storage-high" ||
		!reflect.DeepEqual(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Fatalf("pod spec %+v", pod)
	}
	none := desiredCronJob(testJob(), testCronJobConfig, placedSettings(types.PodPlacement{})).Spec.JobTemplate.Spec.Template.Spec
	if none.Tolerations != nil || none.NodeSelector != nil || none.PriorityClassName != "" || none.ImagePullSecrets != nil {
		t.Fatalf("empty settings must put nothing on the pods: %+v", none)
	}
}

func TestMergeCronJobOwnsThePodSettings(t *testing.T) {
	placed := desiredCronJob(testJob(), testCronJobConfig, placedSettings(testPlacement))
	plain := desiredCronJob(testJob(), testCronJobConfig, placedSettings(types.PodPlacement{}))
	podOf := func(cj *batchv1.CronJob) *corev1.PodSpec { return &cj.Spec.JobTemplate.Spec.Template.Spec }
	edited := func(edit func(*corev1.PodSpec)) func() *batchv1.CronJob {
		return func() *batchv1.CronJob {
			l := asStored(placed)
			edit(podOf(l))
			return l
		}
	}
	cases := []struct {
		name        string
		live        func() *batchv1.CronJob
		desired     *batchv1.CronJob
		wantChanged bool
	}{
		{"unchanged settings cause no write", func() *batchv1.CronJob { return asStored(placed) }, placed, false},
		{"new settings reach an existing CronJob", func() *batchv1.CronJob { return asStored(plain) }, placed, true},
		{"cleared settings are removed", func() *batchv1.CronJob { return asStored(placed) }, plain, true},
		{"empty lists and maps stored as empty cause no write", func() *batchv1.CronJob {
			l := asStored(plain)
			podOf(l).Tolerations, podOf(l).NodeSelector, podOf(l).ImagePullSecrets = []corev1.Toleration{}, map[string]string{}, []corev1.LocalObjectReference{}
			return l
		}, plain, false},
		{"an added toleration is reverted", edited(func(p *corev1.PodSpec) {
			p.Tolerations = append(p.Tolerations, corev1.Toleration{Operator: corev1.TolerationOpExists})
		}), placed, true},
		{"an edited node selector is reverted", edited(func(p *corev1.PodSpec) { p.NodeSelector = map[string]string{"disk": "hdd"} }), placed, true},
		{"an edited priority class is reverted", edited(func(p *corev1.PodSpec) { p.PriorityClassName = "low" }), placed, true},
		{"a removed pull secret is put back", edited(func(p *corev1.PodSpec) { p.ImagePullSecrets = nil }), placed, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			merged, changed := mergeCronJob(c.live(), c.desired)
			if changed != c.wantChanged {
				t.Fatalf("changed = %v, want %v", changed, c.wantChanged)
			}
			got, want := podOf(merged), podOf(c.desired)
			if !reflect.DeepEqual(got.Tolerations, want.Tolerations) && len(got.Tolerations)+len(want.Tolerations) > 0 ||
				!reflect.DeepEqual(got.NodeSelector, want.NodeSelector) && len(got.NodeSelector)+len(want.NodeSelector) > 0 ||
				got.PriorityClassName != want.PriorityClassName ||
				!reflect.DeepEqual(got.ImagePullSecrets, want.ImagePullSecrets) && len(got.ImagePullSecrets)+len(want.ImagePullSecrets) > 0 {
				t.Fatalf("merged pod spec %+v, want the desired settings %+v", got, want)
			}
			if _, again := mergeCronJob(asStored(merged), c.desired); again {
				t.Fatal("merging twice is not stable")
			}
		})
	}
}
