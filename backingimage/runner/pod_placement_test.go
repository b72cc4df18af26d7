package runner

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/types"
)

// testPlacement is a placement with every setting set.
var testPlacement = types.PodPlacement{
	Tolerations:       []corev1.Toleration{{Key: "storage", Operator: corev1.TolerationOpEqual, Value: "only", Effect: corev1.TaintEffectNoSchedule}},
	NodeSelector:      map[string]string{"disk": "ssd"},
	PriorityClassName: "storage-high",
	RegistrySecret:    "regcred",
}

func TestServerPodGetsThePodSettingsButNoNodeSelector(t *testing.T) {
	args := []string{"backing-image-manager", "--disk-path", "/mnt/d2", "--disk-uuid", "disk-2"}
	plain, err := serverPod(testPodRunnerConfig, "backing-image-manager/bim-1", args, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.Tolerations != nil || plain.Spec.PriorityClassName != "" || plain.Spec.ImagePullSecrets != nil {
		t.Fatalf("a runner without placement puts none: %+v", plain.Spec)
	}

	cfg := testPodRunnerConfig
	cfg.Placement = func() types.PodPlacement { return testPlacement }
	pod, err := serverPod(cfg, "backing-image-manager/bim-1", args, ServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pod.Spec.Tolerations, testPlacement.Tolerations) || pod.Spec.PriorityClassName != "storage-high" ||
		!reflect.DeepEqual(pod.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Fatalf("pod spec %+v", pod.Spec)
	}
	if pod.Spec.NodeSelector != nil || pod.Spec.NodeName != "node-1" {
		t.Fatalf("the pod is bound to its disk's node by name, with no selector: %+v", pod.Spec)
	}
	// The settings are not part of what makes a pod be replaced.
	if pod.Annotations[types.AnnotationServerSpec] != plain.Annotations[types.AnnotationServerSpec] {
		t.Fatal("a change of the pod settings would replace running servers")
	}
}
