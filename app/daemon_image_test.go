package app

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func managerPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "longhorn-manager-abcde", Namespace: "longhorn-system"},
		Spec: corev1.PodSpec{Containers: containers}}
}

func TestOwnImageIsThePodsManagerContainers(t *testing.T) {
	kube := fake.NewSimpleClientset(managerPod(
		corev1.Container{Name: "longhorn-csi-plugin", Image: "registry.example.com/other:v1"},
		corev1.Container{Name: "longhorn-manager", Image: "registry.example.com/longhorn-manager:v1.2.3"},
	))
	o := DaemonOptions{Namespace: "longhorn-system", PodName: "longhorn-manager-abcde"}
	if err := o.ownImage(context.Background(), kube); err != nil {
		t.Fatal(err)
	}
	const want = "registry.example.com/longhorn-manager:v1.2.3"
	if o.CronJob.ManagerImage != want || o.ManagerImage != want || o.BackingImageManagerImage != want {
		t.Errorf("images: recurring jobs %q, servers %q, backing image managers %q: want %q for each",
			o.CronJob.ManagerImage, o.ManagerImage, o.BackingImageManagerImage, want)
	}
}

func TestAGivenImageIsKept(t *testing.T) {
	kube := fake.NewSimpleClientset(managerPod(corev1.Container{Name: "longhorn-manager", Image: "from-the-pod:v1"}))
	o := DaemonOptions{Namespace: "longhorn-system", PodName: "longhorn-manager-abcde", ManagerImage: "given:v2"}
	o.CronJob.ManagerImage = "given:v2"
	if err := o.ownImage(context.Background(), kube); err != nil {
		t.Fatal(err)
	}
	if o.CronJob.ManagerImage != "given:v2" || o.ManagerImage != "given:v2" {
		t.Errorf("images %q, %q: want the given --manager-image kept", o.CronJob.ManagerImage, o.ManagerImage)
	}
}

func TestOwnImageSaysWhatIsMissing(t *testing.T) {
	for name, kube := range map[string]*fake.Clientset{
		"no such pod":               fake.NewSimpleClientset(),
		"no longhorn-manager in it": fake.NewSimpleClientset(managerPod(corev1.Container{Name: "sidecar", Image: "x:v1"})),
	} {
		o := DaemonOptions{Namespace: "longhorn-system", PodName: "longhorn-manager-abcde"}
		err := o.ownImage(context.Background(), kube)
		if err == nil || !strings.Contains(err.Error(), "--pod-name longhorn-system/longhorn-manager-abcde") || !strings.Contains(err.Error(), "--manager-image") {
			t.Errorf("%s: got %v, want an error naming --pod-name and --manager-image", name, err)
		}
	}
}
