package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/types"
)

var testPodRunnerConfig = PodRunnerConfig{Namespace: "longhorn-system", NodeName: "node-1", Image: "longhorn-manager:v2", ServiceAccount: "longhorn-service-account"}

func newTestPodRunner() (*PodRunner, *fake.Clientset) {
	kube := fake.NewSimpleClientset()
	r := NewPodRunner(logrus.NewEntry(logrus.New()), kube, testPodRunnerConfig)
	r.StopTimeout, r.pollInterval = time.Second, 10*time.Millisecond
	return r, kube
}

var dataSourceTestArgs = []string{"backing-image-data-source", "--name", "ubuntu", "--uuid", "u1", "--source-type", "download",
	"--disk-path", "/var/lib/longhorn", "--disk-uuid", "disk-1", "--parameter", "url=http://x/y"}

// diskMountsOf lists the host folders pod mounts, with their modes, each
// checked to be mounted at its own path from a hostPath that must exist.
func diskMountsOf(pod *corev1.Pod) string {
	paths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil && v.HostPath.Type != nil && *v.HostPath.Type == corev1.HostPathDirectory {
			paths[v.Name] = v.HostPath.Path
		}
	}
	var out []string
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if p, ok := paths[m.Name]; ok && p == m.MountPath {
			mode := "rw"
			if m.ReadOnly {
				mode = "ro"
			}
			out = append(out, p+" "+mode)
		}
	}
	return strings.Join(out, ", ")
}

func TestServerPodManifest(t *testing.T) {
	bids := &longhorn.BackingImageDataSource{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu", UID: "uid-1"}}
	pod, err := serverPod(testPodRunnerConfig, "backing-image-data-source/ubuntu", dataSourceTestArgs, serverOptions([]ServerOption{WithOwner(bids, "BackingImageDataSource")}))
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != "backing-image-data-source-ubuntu" || pod.Namespace != "longhorn-system" || pod.Spec.NodeName != "node-1" {
		t.Errorf("name %s/%s node %s", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "longhorn-manager:v2" || strings.Join(c.Command, " ") != "longhorn-manager --log-json" {
		t.Errorf("image %s command %v", c.Image, c.Command)
	}
	if got := strings.Join(c.Args, " "); got != strings.Join(dataSourceTestArgs, " ")+" --listen 0.0.0.0:8001 --tls-dir "+ServerTLSMountPath {
		t.Errorf("args %s", got)
	}
	// The servers' leaf, not the CA's key: for a data source the Secret of
	// its narrow role, read-only, readable by the server's user only.
	last := len(pod.Spec.Volumes) - 1
	tlsVolume := pod.Spec.Volumes[last]
	if tlsVolume.Secret == nil || tlsVolume.Secret.SecretName != mtls.DataSourceSecretName || *tlsVolume.Secret.DefaultMode != 0o400 ||
		c.VolumeMounts[last].Name != tlsVolume.Name || c.VolumeMounts[last].MountPath != ServerTLSMountPath || !c.VolumeMounts[last].ReadOnly {
		t.Errorf("TLS volume %+v mount %+v", tlsVolume, c.VolumeMounts)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port.IntValue() != DataSourcePodPort {
		t.Errorf("readiness probe %+v", c.ReadinessProbe)
	}
	// A data source, which fetches untrusted URLs, sees the backing
	// images' folders of its disk and nothing else of it: no replica.
	if got := diskMountsOf(pod); got != "/var/lib/longhorn/backing-images rw, /var/lib/longhorn/tmp rw" {
		t.Errorf("the data source's disk mounts: %s", got)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ServiceAccountName != "longhorn-service-account" {
		t.Errorf("restart %s service account %s", pod.Spec.RestartPolicy, pod.Spec.ServiceAccountName)
	}
	if pod.Labels[types.LabelComponent] != "backing-image-data-source" || pod.Labels[types.LabelBackingImage] != "ubuntu" || pod.Labels[types.LabelDiskUUID] != "disk-1" || pod.Labels[types.LabelServerPodNode] != "node-1" {
		t.Errorf("labels %v", pod.Labels)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].UID != "uid-1" || pod.OwnerReferences[0].Kind != "BackingImageDataSource" ||
		pod.OwnerReferences[0].APIVersion != "longhorn.io/v1beta2" || pod.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Errorf("owner %+v", pod.OwnerReferences)
	}

	mgr, err := serverPod(testPodRunnerConfig, "backing-image-manager/bim-1", []string{"backing-image-manager", "--disk-path", "/mnt/d2", "--disk-uuid", "disk-2"},
		serverOptions([]ServerOption{WithImage("longhorn-manager:v1")}))
	if err != nil {
		t.Fatal(err)
	}
	if mgr.Spec.Containers[0].Image != "longhorn-manager:v1" || mgr.Spec.RestartPolicy != corev1.RestartPolicyAlways ||
		!strings.HasSuffix(strings.Join(mgr.Spec.Containers[0].Args, " "), "--listen 0.0.0.0:8000 --tls-dir "+ServerTLSMountPath) {
		t.Errorf("manager pod %+v", mgr.Spec)
	}
	if v := mgr.Spec.Volumes[len(mgr.Spec.Volumes)-1]; v.Secret == nil || v.Secret.SecretName != mtls.ServerSecretName {
		t.Errorf("the manager's TLS volume %+v, want the component leaf's Secret", v)
	}
	// A disk's manager also reads the replicas' records, read-only.
	if got := diskMountsOf(mgr); got != "/mnt/d2/backing-images rw, /mnt/d2/tmp rw, /mnt/d2/replicas ro" {
		t.Errorf("the manager's disk mounts: %s", got)
	}
	if mgr.Annotations[types.AnnotationServerSpec] == pod.Annotations[types.AnnotationServerSpec] {
		t.Error("two different servers have the same spec hash")
	}

	for name, args := range map[string][]string{
		"no subcommand":       nil,
		"unknown subcommand":  {"daemon", "--disk-path", "/d"},
		"no disk path":        {"backing-image-manager", "--disk-uuid", "x"},
		"relative disk path":  {"backing-image-manager", "--disk-path", "d"},
		"disk path last flag": {"backing-image-manager", "--disk-path"},
	} {
		if _, err := serverPod(testPodRunnerConfig, "k", args, ServerOptions{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestServerPodNameIsAValidStableDNSLabel(t *testing.T) {
	if got := ServerPodName("backing-image-manager/bim-abc"); got != "backing-image-manager-bim-abc" {
		t.Errorf("got %s", got)
	}
	long := "backing-image-data-source/" + strings.Repeat("a", 80)
	n := ServerPodName(long)
	if len(n) > 63 || n != ServerPodName(long) || n == ServerPodName(long+"b") {
		t.Errorf("long key: %s", n)
	}
	if a, b := ServerPodName("x/A.b"), ServerPodName("x/a-b"); a == b || strings.ContainsAny(a, "A./") {
		t.Errorf("names %s %s", a, b)
	}
}

// setPod changes the live pod's status as a kubelet would.
func setPod(t *testing.T, kube *fake.Clientset, name string, f func(*corev1.Pod)) {
	t.Helper()
	pods := kube.CoreV1().Pods("longhorn-system")
	pod, err := pods.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f(pod)
	if _, err := pods.Update(context.Background(), pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func running(pod *corev1.Pod) {
	pod.Status.Phase, pod.Status.PodIP = corev1.PodRunning, "10.42.0.7"
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

func TestPodRunnerStartAddressStop(t *testing.T) {
	r, kube := newTestPodRunner()
	const key, pod = "backing-image-data-source/ubuntu", "backing-image-data-source-ubuntu"
	if _, err := r.Address(key); !errors.Is(err, ErrServerNotStarted) {
		t.Fatalf("before Start: %v", err)
	}
	err := r.Start(key, dataSourceTestArgs)
	if !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "created") {
		t.Fatalf("first Start: %v, want pending: created", err)
	}
	// No kubelet yet: the pod has no status.
	if err := r.Start(key, dataSourceTestArgs); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "waiting for the kubelet of node node-1") {
		t.Fatalf("Start of a pod with no status: %v", err)
	}
	if _, err := r.Address(key); !errors.Is(err, ErrServerPending) {
		t.Fatalf("Address of a pod with no status: %v", err)
	}
	setPod(t, kube, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "pull longhorn-manager:v2: not found"}}}}
	})
	if err := r.Start(key, dataSourceTestArgs); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "ImagePullBackOff: pull longhorn-manager:v2: not found") {
		t.Fatalf("Start of a pod pulling its image: %v", err)
	}
	setPod(t, kube, pod, func(p *corev1.Pod) {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "node-1 is gone"}}}
	})
	if _, err := r.Address(key); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "unschedulable: Unschedulable node-1 is gone") {
		t.Fatalf("Address of an unschedulable pod: %v", err)
	}
	setPod(t, kube, pod, func(p *corev1.Pod) { running(p); p.Status.Conditions[0].Status = corev1.ConditionFalse })
	if err := r.Start(key, dataSourceTestArgs); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "readiness") {
		t.Fatalf("Start of a running pod not ready: %v", err)
	}
	setPod(t, kube, pod, running)
	if err := r.Start(key, dataSourceTestArgs); err != nil {
		t.Fatalf("Start of a ready pod: %v", err)
	}
	if addr, err := r.Address(key); err != nil || addr != "10.42.0.7:8001" {
		t.Fatalf("Address %q, %v", addr, err)
	}
	if pods, _ := kube.CoreV1().Pods("longhorn-system").List(context.Background(), metav1.ListOptions{}); len(pods.Items) != 1 {
		t.Fatalf("%d pods, want 1", len(pods.Items))
	}

	// A restarted daemon's runner adopts the pod.
	r2 := NewPodRunner(r.log, kube, testPodRunnerConfig)
	if err := r2.Start(key, dataSourceTestArgs); err != nil {
		t.Fatalf("Start by a new runner: %v, want the pod adopted", err)
	}

	r.Stop(key)
	if _, err := r.Address(key); !errors.Is(err, ErrServerNotStarted) {
		t.Fatalf("after Stop: %v", err)
	}
	r.Stop(key) // no pod: a no-op
}

func TestPodRunnerReportsATerminatedPodAndReplacesIt(t *testing.T) {
	r, kube := newTestPodRunner()
	const key, pod = "backing-image-data-source/ubuntu", "backing-image-data-source-ubuntu"
	_ = r.Start(key, dataSourceTestArgs)
	setPod(t, kube, pod, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}}
	})
	_, err := r.Address(key)
	if err == nil || errors.Is(err, ErrServerPending) || errors.Is(err, ErrServerNotStarted) ||
		!strings.Contains(err.Error(), "terminated: exit code 3, Error") || !strings.Contains(err.Error(), "last log lines: fake logs") {
		t.Fatalf("Address of a failed pod: %v, want the exit with its log", err)
	}
	old, _ := kube.CoreV1().Pods("longhorn-system").Get(context.Background(), pod, metav1.GetOptions{})
	if err := r.Start(key, dataSourceTestArgs); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "replacing") {
		t.Fatalf("Start after the failure: %v, want the pod replaced", err)
	}
	if err := r.Start(key, dataSourceTestArgs); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "created") {
		t.Fatalf("Start once the old pod is gone: %v", err)
	}
	cur, _ := kube.CoreV1().Pods("longhorn-system").Get(context.Background(), pod, metav1.GetOptions{})
	if cur.Status.Phase != "" || cur.UID == old.UID && old.UID != "" {
		t.Fatalf("the new pod is the old one: %+v", cur.Status)
	}
}

func TestPodRunnerReplacesAPodOfOtherArgsOrImage(t *testing.T) {
	r, kube := newTestPodRunner()
	const key, pod = "backing-image-manager/bim-1", "backing-image-manager-bim-1"
	args := []string{"backing-image-manager", "--disk-path", "/d", "--disk-uuid", "u"}
	_ = r.Start(key, args, WithImage("img:v1"))
	setPod(t, kube, pod, running)
	if err := r.Start(key, args, WithImage("img:v1")); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(key, args, WithImage("img:v2")); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "another image") {
		t.Fatalf("Start with another image: %v", err)
	}
	if _, err := r.Address(key); !errors.Is(err, ErrServerNotStarted) {
		t.Fatalf("the old pod is still there: %v", err)
	}
	_ = r.Start(key, args, WithImage("img:v2"))
	p, _ := kube.CoreV1().Pods("longhorn-system").Get(context.Background(), pod, metav1.GetOptions{})
	if p.Spec.Containers[0].Image != "img:v2" {
		t.Fatalf("image %s", p.Spec.Containers[0].Image)
	}
}

func TestPodRunnerCrashLoopOfAManagerIsPendingWithTheLastExit(t *testing.T) {
	r, kube := newTestPodRunner()
	const key, pod = "backing-image-manager/bim-1", "backing-image-manager-bim-1"
	_ = r.Start(key, []string{"backing-image-manager", "--disk-path", "/d"})
	setPod(t, kube, pod, func(p *corev1.Pod) {
		running(p)
		p.Status.Conditions[0].Status = corev1.ConditionFalse
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "server",
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}
	})
	if _, err := r.Address(key); !errors.Is(err, ErrServerPending) || !strings.Contains(err.Error(), "CrashLoopBackOff (last exit code 1, Error)") {
		t.Fatalf("Address: %v", err)
	}
}
