//go:build e2e

package backingimage

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// The backing image server pods are made with the tolerations, priority
// class and registry secret the settings hold when they are created; they
// are bound to their disk's node by name, so no node selector.
func TestBackingImageServerPodsGetThePodSettings(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t, withPodRunner)
	kube := testcluster.Get(t).KubeClient(t)
	removePodsAtEnd(t, kube, ns)

	// The apiserver refuses a pod naming a PriorityClass that does not exist.
	pc := "bi-" + ns
	if _, err := kube.SchedulingV1().PriorityClasses().Create(context.Background(),
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: pc}, Value: 1000}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.SchedulingV1().PriorityClasses().Delete(context.Background(), pc, metav1.DeleteOptions{})
	})

	values := map[types.SettingName]string{
		types.SettingNameTaintToleration:                     "storage=only:NoExecute",
		types.SettingNameSystemManagedComponentsNodeSelector: "disk:ssd",
		types.SettingNamePriorityClass:                       pc,
		types.SettingNameRegistrySecret:                      "regcred",
	}
	for name, value := range values {
		err := datastore.RetryOnConflict(func() error {
			s, err := lh.LonghornV1beta2().Settings(ns).Get(context.Background(), string(name), metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Value = value
			_, err = lh.LonghornV1beta2().Settings(ns).Update(context.Background(), s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The daemon's API reads its cache: once it shows the last value, the
	// pods are made with all of them.
	framework.Eventually(t, 10*time.Second, "the daemon sees the settings", func() (bool, error) {
		resp, err := http.Get("http://" + d.APIAddress + "/v1/settings/priority-class")
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), `"value":"`+pc+`"`), nil
	})

	createDownloadImage(t, lh, ns, "placed", "http://127.0.0.1:1/image.raw", "", disks)
	framework.Eventually(t, 30*time.Second, "a pod for the data source and each disk's manager", func() (bool, error) {
		return len(serverPods(t, kube, ns)) == 1+len(disks), nil
	})
	// The apiserver adds its own NoExecute tolerations (not-ready,
	// unreachable) to every pod: the setting's comes first.
	want := corev1.Toleration{Key: "storage", Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoExecute}
	for name, p := range serverPods(t, kube, ns) {
		if len(p.Spec.Tolerations) == 0 || !reflect.DeepEqual(p.Spec.Tolerations[0], want) || p.Spec.PriorityClassName != pc ||
			!reflect.DeepEqual(p.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
			t.Errorf("pod %s: tolerations %+v priority class %q pull secrets %+v", name, p.Spec.Tolerations, p.Spec.PriorityClassName, p.Spec.ImagePullSecrets)
		}
		if p.Spec.NodeSelector != nil || p.Spec.NodeName != "node-1" {
			t.Errorf("pod %s: node %q selector %v", name, p.Spec.NodeName, p.Spec.NodeSelector)
		}
	}
}
