package instancemanager

import (
	"context"
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

const ns = "longhorn-system"

var testConfig = Config{Namespace: ns, NodeID: "node-1", Image: "longhorn-manager:v2", DataDir: "/var/lib/longhorn"}

func newTestKeeper(objects ...*longhorn.InstanceManager) (*Keeper, *fake.Clientset, *lhfake.Clientset) {
	kube := fake.NewSimpleClientset()
	lh := lhfake.NewSimpleClientset()
	for _, im := range objects {
		if _, err := lh.LonghornV1beta2().InstanceManagers(ns).Create(context.Background(), im, metav1.CreateOptions{}); err != nil {
			panic(err)
		}
	}
	return NewKeeper(logrus.NewEntry(logrus.New()), kube, lh, testConfig), kube, lh
}

func setPhase(t *testing.T, kube *fake.Clientset, name string, phase corev1.PodPhase) {
	t.Helper()
	pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = phase
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func imNames(t *testing.T, lh *lhfake.Clientset) []string {
	t.Helper()
	list, err := lh.LonghornV1beta2().InstanceManagers(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, im := range list.Items {
		names = append(names, im.Name)
	}
	return names
}

func TestEnsureMakesTheNodesInstanceManagerAndItsPodThenAdoptsIt(t *testing.T) {
	k, kube, lh := newTestKeeper()
	ctx := context.Background()
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("first Ensure: want ErrPending while the pod starts, got %v", err)
	}
	want := Name("node-1", "longhorn-manager:v2")
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the pod was not made: %v", err)
	}
	c := pod.Spec.Containers[0]
	if pod.Spec.NodeName != "node-1" || c.Image != "longhorn-manager:v2" || pod.OwnerReferences[0].Name != want ||
		c.Command[2] != "instance-manager" || c.Command[3] != "--dir=/var/lib/longhorn/instance-manager/"+want[17:25] || pod.Spec.HostNetwork {
		t.Fatalf("pod made wrong: node %q image %q owner %v command %v hostNetwork %v", pod.Spec.NodeName, c.Image, pod.OwnerReferences, c.Command, pod.Spec.HostNetwork)
	}
	if c.Resources.Limits.Memory().String() != "1Gi" {
		t.Fatalf("memory limit %s, want 1Gi", c.Resources.Limits.Memory())
	}
	// Pending: asked again, nothing new is made.
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("Ensure while pending: %v", err)
	}
	setPhase(t, kube, want, corev1.PodRunning)
	im, err := k.Ensure(ctx)
	if err != nil || im.Name != want || k.Current().Name != want {
		t.Fatalf("Ensure of a running pod: %v %v", im, err)
	}
	if names := imNames(t, lh); len(names) != 1 {
		t.Fatalf("instance managers: %v, want one", names)
	}
}

func TestEnsureMakesItsOwnBesideARunningOneOfAnOlderImage(t *testing.T) {
	old := newObject(testConfig, "longhorn-manager:v1")
	k, kube, lh := newTestKeeper(old)
	ctx := context.Background()
	oldPod := podFor(Config{Namespace: ns, NodeID: "node-1", DataDir: "/var/lib/longhorn"}, old, ppEmpty)
	// A pod of an earlier layout, serving in the root folder itself.
	oldPod.Spec.Containers[0].Command[3] = "--dir=/var/lib/longhorn/instance-manager"
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, oldPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPhase(t, kube, old.Name, corev1.PodRunning)
	want := Name("node-1", "longhorn-manager:v2")
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("Ensure beside a running v1: want ErrPending while its own pod starts, got %v", err)
	}
	if names := imNames(t, lh); len(names) != 2 {
		t.Fatalf("instance managers: %v, want v1's and v2's side by side", names)
	}
	if k.Current().Name != want {
		t.Fatalf("current is %s, want the v2 one, %s", k.Current().Name, want)
	}
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("v2's pod: %v", err)
	}
	if got, wantDir := DirOf(pod, "/var/lib/longhorn"), "/var/lib/longhorn/instance-manager/"+want[17:25]; got != wantDir {
		t.Fatalf("v2's folder: %s, want %s", got, wantDir)
	}
	if p, err := kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the running v1 pod was touched: %v", err)
	}
	others, err := k.Others(ctx)
	if err != nil || len(others) != 1 || others[0].InstanceManager.Name != old.Name {
		t.Fatalf("Others: %+v %v, want v1's", others, err)
	}
	if others[0].Dir != "/var/lib/longhorn/instance-manager" {
		t.Fatalf("v1's folder is %s: its pod's command names the root", others[0].Dir)
	}
}

func TestEnsureWaitsWhileItsOwnPodGoesAway(t *testing.T) {
	k, kube, _ := newTestKeeper()
	ctx := context.Background()
	mine := newObject(testConfig, testConfig.Image)
	pod := podFor(testConfig, mine, ppEmpty)
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	pod.Finalizers = []string{"test"}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("want ErrPending while its pod is still going: %v", err)
	}
}

func TestEnsureMakesAnEndedPodAgain(t *testing.T) {
	k, kube, _ := newTestKeeper()
	ctx := context.Background()
	_, _ = k.Ensure(ctx)
	want := Name("node-1", "longhorn-manager:v2")
	setPhase(t, kube, want, corev1.PodFailed)
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("Ensure of a failed pod: %v", err)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{}); err == nil {
		t.Fatal("the failed pod was not deleted")
	}
	created := 0
	k.cfg.OnPodCreated = func() { created++ }
	_, _ = k.Ensure(ctx)
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{}); err != nil || created != 1 {
		t.Fatalf("the pod was not made again: %v (created %d)", err, created)
	}
}

func TestOtherNodesInstanceManagersAreNotTouched(t *testing.T) {
	other := newObject(Config{Namespace: ns, NodeID: "node-2"}, "longhorn-manager:v1")
	k, kube, lh := newTestKeeper(other)
	_, _ = k.Ensure(context.Background())
	if names := imNames(t, lh); len(names) != 2 {
		t.Fatalf("instance managers: %v, want node-2's and node-1's", names)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(context.Background(), other.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("a pod was made for another node's instance manager")
	}
}

var ppEmpty = types.PodPlacement{}
