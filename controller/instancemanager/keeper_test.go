package instancemanager

import (
	"context"
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
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
		c.Command[2] != "instance-manager" || c.Command[3] != "--dir=/var/lib/longhorn/instance-manager" || pod.Spec.HostNetwork {
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

func TestEnsureKeepsARunningInstanceManagerOfAnOlderImage(t *testing.T) {
	old := newObject(testConfig, "longhorn-manager:v1")
	k, kube, lh := newTestKeeper(old)
	ctx := context.Background()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, podFor(testConfig, old, ppEmpty), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPhase(t, kube, old.Name, corev1.PodRunning)
	im, err := k.Ensure(ctx)
	if err != nil || im.Name != old.Name {
		t.Fatalf("a running instance manager of v1 must be adopted (its engines run on): got %v, %v", im, err)
	}
	if names := imNames(t, lh); len(names) != 1 {
		t.Fatalf("a second instance manager was made beside the running one: %v", names)
	}

	// It hosts an engine: not replaced.
	if rolled, err := k.Roll(ctx, fakeEngines{connected: true, hosting: 1}); rolled || err != nil {
		t.Fatalf("Roll replaced an instance manager that hosts an engine: %v %v", rolled, err)
	}
	// Not followed (its engines unknown): not replaced.
	if rolled, _ := k.Roll(ctx, fakeEngines{connected: false}); rolled {
		t.Fatal("Roll replaced an instance manager whose engines are not known")
	}
	// It hosts none: replaced, and no engine starts until the new one is
	// the node's.
	if rolled, err := k.Roll(ctx, fakeEngines{connected: true}); !rolled || err != nil {
		t.Fatalf("Roll of an idle v1 instance manager: %v %v", rolled, err)
	}
	if _, err := k.Gate(startRecorder{}).Start("vol", 1, nil, true); !errors.Is(err, ErrPending) {
		t.Fatalf("an engine start while replacing: want ErrPending, got %v", err)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("the old pod was not deleted")
	}
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("Ensure after the roll: %v", err)
	}
	want := Name("node-1", "longhorn-manager:v2")
	if k.Current().Name != want {
		t.Fatalf("current is %s, want the v2 one", k.Current().Name)
	}
	if _, err := k.Gate(startRecorder{}).Start("vol", 1, nil, true); !errors.Is(err, errStarted) {
		t.Fatalf("an engine start once the new one is the node's: got %v", err)
	}
}

func TestEnsureMakesNothingWhileAnOldPodGoesAway(t *testing.T) {
	old := newObject(testConfig, "longhorn-manager:v1")
	k, kube, _ := newTestKeeper(old)
	ctx := context.Background()
	pod := podFor(testConfig, old, ppEmpty)
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	pod.Finalizers = []string{"test"}
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("want ErrPending while the old pod is still there: %v", err)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, Name("node-1", "longhorn-manager:v2"), metav1.GetOptions{}); err == nil {
		t.Fatal("a new pod was made while the old one holds the folder")
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

type fakeEngines struct {
	connected bool
	hosting   int
}

func (f fakeEngines) Connected() bool { return f.connected }
func (f fakeEngines) Hosting() int    { return f.hosting }

var errStarted = errors.New("started")

// startRecorder is an Instances whose Start says it was called.
type startRecorder struct{}

func (startRecorder) Start(string, int64, []instance.ReplicaDir, bool) (instance.Instance, error) {
	return instance.Instance{}, errStarted
}
func (startRecorder) Get(string) (instance.Instance, bool)     { return instance.Instance{}, false }
func (startRecorder) Stop(string) error                        { return nil }
func (startRecorder) StopEngine(string, instance.Engine) error { return nil }
func (startRecorder) OnChange(func(string))                    {}
func (startRecorder) OnStart(func(string))                     {}
func (startRecorder) Close()                                   {}

func TestEnsureDeletesAPendingPodOfAnotherImageBeforeMakingItsOwn(t *testing.T) {
	old := newObject(testConfig, "longhorn-manager:v1")
	k, kube, _ := newTestKeeper(old)
	ctx := context.Background()
	if _, err := kube.CoreV1().Pods(ns).Create(ctx, podFor(testConfig, old, ppEmpty), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setPhase(t, kube, old.Name, corev1.PodPending)
	if _, err := k.Ensure(ctx); !errors.Is(err, ErrPending) {
		t.Fatalf("want ErrPending while the old pod goes: %v", err)
	}
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, old.Name, metav1.GetOptions{}); err == nil {
		t.Fatal("the pending pod of the old image, which hosts nothing, was kept")
	}
	want := Name("node-1", "longhorn-manager:v2")
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{}); err == nil {
		t.Fatal("the new pod was made beside the old one in the same call")
	}
	_, _ = k.Ensure(ctx)
	if _, err := kube.CoreV1().Pods(ns).Get(ctx, want, metav1.GetOptions{}); err != nil {
		t.Fatalf("the new image's pod once the old one is gone: %v", err)
	}
}
