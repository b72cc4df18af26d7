//go:build e2e

package recurringjob

import (
	"context"
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

func cronJobPod(cj *batchv1.CronJob) corev1.PodSpec { return cj.Spec.JobTemplate.Spec.Template.Spec }

// The four pod settings, set over the API, reach the pod template of every
// recurring job's CronJob; a bad value is refused by the API naming the
// setting and the rule, and one written straight to the Setting object is
// left out of the pods (none) while the others still apply.
func TestPodSettingsReachTheRecurringJobCronJobs(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.CreateJob(t, "placed", longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 * * * *", Retain: 2, Concurrency: 1})
	cj := e.WaitCronJob(t, "placed", "CronJob created", func(*batchv1.CronJob) bool { return true })
	if pod := cronJobPod(cj); len(pod.Tolerations)+len(pod.NodeSelector)+len(pod.ImagePullSecrets) > 0 || pod.PriorityClassName != "" {
		t.Fatalf("with empty settings the pods get no placement, got %+v", pod)
	}

	e.Call(t, "PUT", "/v1/settings/taint-toleration", `{"value":"storage=only:NoSchedule; maintenance:NoExecute"}`).Expect(t, 200)
	e.Call(t, "PUT", "/v1/settings/system-managed-components-node-selector", `{"value":"disk:ssd;example.com/zone:a"}`).Expect(t, 200)
	e.Call(t, "PUT", "/v1/settings/priority-class", `{"value":"storage-high"}`).Expect(t, 200)
	e.Call(t, "PUT", "/v1/settings/registry-secret", `{"value":"regcred"}`).Expect(t, 200)

	wantTolerations := []corev1.Toleration{
		{Key: "storage", Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoSchedule},
		{Key: "maintenance", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	wantSelector := map[string]string{"disk": "ssd", "example.com/zone": "a"}
	placed := func(cj *batchv1.CronJob) bool {
		pod := cronJobPod(cj)
		return reflect.DeepEqual(pod.Tolerations, wantTolerations) && reflect.DeepEqual(pod.NodeSelector, wantSelector) &&
			pod.PriorityClassName == "storage-high" &&
			reflect.DeepEqual(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}})
	}
	e.WaitCronJob(t, "placed", "the pod template gets the four settings", placed)

	// A manual edit of them is reverted.
	err := datastore.RetryOnConflict(func() error {
		live, err := e.Kube.BatchV1().CronJobs(e.NS).Get(context.Background(), "placed", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod := &live.Spec.JobTemplate.Spec.Template.Spec
		pod.Tolerations, pod.NodeSelector, pod.PriorityClassName, pod.ImagePullSecrets = nil, map[string]string{"disk": "hdd"}, "", nil
		_, err = e.Kube.BatchV1().CronJobs(e.NS).Update(context.Background(), live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitCronJob(t, "placed", "manual edit of the placement reverted", placed)

	// Bad values are refused by the API, naming the setting and the rule.
	for _, c := range []struct{ setting, value, rule string }{
		{"taint-toleration", "storage=only:NoRun", "must be NoSchedule, PreferNoSchedule or NoExecute"},
		{"taint-toleration", "node-role.kubernetes.io/control-plane:NoSchedule", "reserved for Kubernetes"},
		{"system-managed-components-node-selector", "disk=ssd", "must be label-key:label-value"},
		{"system-managed-components-node-selector", "disk:not ok", "is invalid"},
		{"priority-class", "Storage_High", "must be a PriorityClass name"},
		{"registry-secret", "reg cred", "must be a Secret name"},
	} {
		e.Call(t, "PUT", "/v1/settings/"+c.setting, `{"value":"`+c.value+`"}`).Expect(t, 400, "setting "+c.setting, c.rule)
	}
	e.Call(t, "GET", "/v1/settings/priority-class", "").Expect(t, 200, `"value":"storage-high"`)

	// A bad value written past the API (kubectl) is marked not applied and
	// left out of the pods; the other settings stay.
	e.SetSetting(t, types.SettingNameTaintToleration, "storage=only:Sometimes")
	framework.Eventually(t, 15*time.Second, "the bad setting marked not applied", func() (bool, error) {
		s, err := e.LH.LonghornV1beta2().Settings(e.NS).Get(context.Background(), string(types.SettingNameTaintToleration), metav1.GetOptions{})
		return err == nil && !s.Status.Applied, nil
	})
	e.WaitCronJob(t, "placed", "an invalid toleration setting means no tolerations, the rest kept", func(cj *batchv1.CronJob) bool {
		pod := cronJobPod(cj)
		return len(pod.Tolerations) == 0 && reflect.DeepEqual(pod.NodeSelector, wantSelector) && pod.PriorityClassName == "storage-high"
	})

	// Emptied settings take everything off again.
	for _, s := range []string{"taint-toleration", "system-managed-components-node-selector", "priority-class", "registry-secret"} {
		e.Call(t, "PUT", "/v1/settings/"+s, `{"value":""}`).Expect(t, 200)
	}
	e.WaitCronJob(t, "placed", "emptied settings leave no placement", func(cj *batchv1.CronJob) bool {
		pod := cronJobPod(cj)
		return len(pod.Tolerations)+len(pod.NodeSelector)+len(pod.ImagePullSecrets) == 0 && pod.PriorityClassName == ""
	})
}
