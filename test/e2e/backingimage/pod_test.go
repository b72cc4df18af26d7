//go:build e2e

package backingimage

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

const testBackingImageManagerImage = "backing-image-manager:test"

func withPodRunner(o *app.DaemonOptions) {
	o.BackingImageServerRunner = app.BackingImageServerRunnerPod
	o.BackingImageManagerImage = testBackingImageManagerImage
}

// serverPods are the backing image server pods in ns, by name.
func serverPods(t *testing.T, kube kubernetes.Interface, ns string) map[string]*corev1.Pod {
	t.Helper()
	l, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: types.LabelComponent})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*corev1.Pod{}
	for i := range l.Items {
		out[l.Items[i].Name] = &l.Items[i]
	}
	return out
}

// removePodsAtEnd removes the server pods left in ns when the test ends:
// with no kubelet to confirm, they would hold the namespace.
func removePodsAtEnd(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Cleanup(func() {
		l, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: types.LabelComponent})
		if err != nil {
			return
		}
		for _, p := range l.Items {
			_ = kube.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	})
}

// confirmDeletions does what a kubelet does once a deleted pod's
// container stopped: it removes the pod.
func confirmDeletions(kube kubernetes.Interface, ns string, pods map[string]*corev1.Pod) {
	for name, p := range pods {
		if p.DeletionTimestamp != nil {
			_ = kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		}
	}
}

// On the test control plane no kubelet runs the pods: they stay Pending,
// and the controllers say so rather than fail.
func TestBackingImageServerPodsAreCreatedAndWaitedFor(t *testing.T) {
	lh, ns, _, disks := framework.TwoDiskNode(t, withPodRunner)
	cluster := testcluster.Get(t)
	kube := cluster.KubeClient(t)
	removePodsAtEnd(t, kube, ns)
	createDownloadImage(t, lh, ns, "podded", "http://127.0.0.1:1/image.raw", "", disks)

	var bids *longhorn.BackingImageDataSource
	var bims []longhorn.BackingImageManager
	framework.Eventually(t, 30*time.Second, "a pod for the data source and for each disk's manager", func() (bool, error) {
		var err error
		if bids, err = lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "podded", metav1.GetOptions{}); err != nil {
			return false, nil
		}
		l, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(l.Items) != len(disks) {
			return false, err
		}
		bims = l.Items
		return len(serverPods(t, kube, ns)) == 1+len(disks), nil
	})
	pods := serverPods(t, kube, ns)
	ds := pods[runner.ServerPodName("backing-image-data-source/podded")]
	if ds == nil {
		t.Fatalf("no data source pod among %v", slices.Collect(maps.Keys(pods)))
	}
	c := ds.Spec.Containers[0]
	if ds.Spec.NodeName != "node-1" || c.Image != framework.TestCronJobConfig.ManagerImage || ds.Spec.RestartPolicy != corev1.RestartPolicyNever ||
		ds.Spec.ServiceAccountName != framework.ServiceAccount || ds.Spec.Volumes[0].HostPath.Path != filepath.Join(bids.Spec.DiskPath, "backing-images") ||
		!slices.Contains(c.Args, "--source-type") || !slices.Contains(c.Args, bids.Spec.UUID) || !slices.Contains(c.Args, "0.0.0.0:8001") || !slices.Contains(c.Args, runner.ServerTLSMountPath) {
		t.Errorf("data source pod: node %s image %s restart %s sa %s volumes %+v args %v", ds.Spec.NodeName, c.Image, ds.Spec.RestartPolicy,
			ds.Spec.ServiceAccountName, ds.Spec.Volumes, c.Args)
	}
	if o := ds.OwnerReferences; len(o) != 1 || o[0].Kind != "BackingImageDataSource" || o[0].UID != bids.UID {
		t.Errorf("data source pod owners %+v", o)
	}
	for _, bim := range bims {
		p := pods[runner.ServerPodName("backing-image-manager/"+bim.Name)]
		if p == nil {
			t.Fatalf("no pod for manager %s", bim.Name)
		}
		if p.Spec.NodeName != "node-1" || p.Spec.Containers[0].Image != testBackingImageManagerImage || bim.Spec.Image != testBackingImageManagerImage ||
			p.Spec.Volumes[0].HostPath.Path != filepath.Join(disks[bim.Spec.DiskUUID], "backing-images") || !slices.Contains(p.Spec.Containers[0].Args, bim.Spec.DiskUUID) ||
			p.Labels[types.LabelDiskUUID] != bim.Spec.DiskUUID || p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
			t.Errorf("manager %s pod: %+v", bim.Name, p.Spec)
		}
		if o := p.OwnerReferences; len(o) != 1 || o[0].Kind != "BackingImageManager" || o[0].UID != bim.UID {
			t.Errorf("manager %s pod owners %+v", bim.Name, o)
		}
	}

	// The data source waits for its pod, and keeps waiting: no failure,
	// no restart of the pod.
	uid := ds.UID
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "podded", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status.CurrentState == longhorn.BackingImageStateFailed {
			t.Fatalf("the data source failed while its pod waits: %s", cur.Status.Message)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if p := serverPods(t, kube, ns)[ds.Name]; p == nil || p.UID != uid {
		t.Fatal("the data source's pod was replaced while it waited")
	}
	cur, _ := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "podded", metav1.GetOptions{})
	if cur.Status.CurrentState != longhorn.BackingImageStateStarting || !strings.Contains(cur.Status.Message, "waiting for the kubelet of node node-1") {
		t.Fatalf("data source state %s (%s), want starting", cur.Status.CurrentState, cur.Status.Message)
	}
	if events, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=DataSourceFailed"}); err == nil && len(events.Items) > 0 {
		t.Fatalf("DataSourceFailed events while the pod waits: %s", events.Items[0].Message)
	}

	// The pod's server exits: the data source fails with the exit's
	// reason, and after the backoff a new pod replaces the old one.
	ds.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "server",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error", Message: "disk full"}}}}}
	if _, err := kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), ds, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the data source fails with the pod's exit", func() (bool, error) {
		cur, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "podded", metav1.GetOptions{})
		return err == nil && cur.Status.CurrentState == longhorn.BackingImageStateFailed &&
			strings.Contains(cur.Status.Message, "terminated: exit code 2, Error: disk full"), err
	})
	framework.Eventually(t, 30*time.Second, "a new pod replaces the failed one, and the data source waits for it", func() (bool, error) {
		p := serverPods(t, kube, ns)[ds.Name]
		cur, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "podded", metav1.GetOptions{})
		return err == nil && p != nil && p.UID != uid && p.Status.Phase == corev1.PodPending && cur.Status.CurrentState == longhorn.BackingImageStateStarting, err
	})

	// Deleting the image deletes its pods; the stand-in kubelet confirms.
	if err := lh.LonghornV1beta2().BackingImages(ns).Delete(context.Background(), "podded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "the server pods are deleted", func() (bool, error) {
		pods := serverPods(t, kube, ns)
		confirmDeletions(kube, ns, pods)
		return len(pods) == 0, nil
	})

	// The daemon did all this as its ServiceAccount, and may do no more
	// with pods than it needs.
	sa, err := kubernetes.NewForConfig(cluster.ServiceAccountConfig(ns, framework.ServiceAccount))
	if err != nil {
		t.Fatal(err)
	}
	other := cluster.NewNamespace(t)
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stray"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	checks := map[string]error{}
	_, checks["list pods"] = sa.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	_, checks["create a pod in another namespace"] = sa.CoreV1().Pods(other).Create(context.Background(), stray, metav1.CreateOptions{})
	_, checks["update a pod's status"] = sa.CoreV1().Pods(ns).UpdateStatus(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}, metav1.UpdateOptions{})
	for what, err := range checks {
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the ServiceAccount: %v, want Forbidden", what, err)
		}
	}
	if _, err := sa.CoreV1().Pods(ns).Get(context.Background(), "x", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get a pod as the ServiceAccount: %v, want NotFound", err)
	}
}

// fakeKubelet runs the server of every backing image server pod in ns as
// a process of this test binary on 127.0.0.1, marks the pod Running and
// Ready with podIP 127.0.0.1 once it listens, and kills the process and
// removes the pod once the pod is deleted.
type fakeKubelet struct {
	t     *testing.T
	admin kubernetes.Interface
	ns    string
	mu    sync.Mutex
	procs map[string]*exec.Cmd
}

func startFakeKubelet(t *testing.T, admin kubernetes.Interface, ns string) {
	k := &fakeKubelet{t: t, admin: admin, ns: ns, procs: map[string]*exec.Cmd{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			k.step(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		k.mu.Lock()
		defer k.mu.Unlock()
		for name := range k.procs {
			k.kill(name)
		}
	})
}

func (k *fakeKubelet) kill(name string) {
	if cmd := k.procs[name]; cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		delete(k.procs, name)
	}
}

func (k *fakeKubelet) step(ctx context.Context) {
	l, err := k.admin.CoreV1().Pods(k.ns).List(ctx, metav1.ListOptions{LabelSelector: types.LabelComponent})
	if err != nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for i := range l.Items {
		pod := &l.Items[i]
		if pod.DeletionTimestamp != nil {
			k.kill(pod.Name)
			_ = k.admin.CoreV1().Pods(k.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			continue
		}
		if k.procs[pod.Name] != nil || pod.Status.Phase == corev1.PodRunning {
			continue
		}
		c := pod.Spec.Containers[0]
		args := slices.Clone(c.Args)
		port := strconv.Itoa(int(c.Ports[0].ContainerPort))
		for i := range args {
			if args[i] == "--listen" && i+1 < len(args) {
				args[i+1] = "127.0.0.1:" + port
			}
			if args[i] == "--tls-dir" && i+1 < len(args) {
				// The kubelet mounts the servers' Secret there.
				dir, err := k.mountSecret(ctx, pod, args[i+1])
				if err != nil {
					k.t.Errorf("fake kubelet: %s: %v", pod.Name, err)
					return
				}
				args[i+1] = dir
			}
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), framework.EnvRunServer+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			k.t.Errorf("fake kubelet: start %s: %v", pod.Name, err)
			continue
		}
		k.procs[pod.Name] = cmd
		if !waitListening("127.0.0.1:"+port, 10*time.Second) {
			k.t.Errorf("fake kubelet: the server of %s does not listen on %s", pod.Name, port)
			continue
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if _, err := k.admin.CoreV1().Pods(k.ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
			k.t.Errorf("fake kubelet: status of %s: %v", pod.Name, err)
		}
	}
}

// mountSecret writes the Secret of the pod's volume mounted at path into
// a folder of the test, as the kubelet projects a Secret volume.
func (k *fakeKubelet) mountSecret(ctx context.Context, pod *corev1.Pod, path string) (string, error) {
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			s, err := k.admin.CoreV1().Secrets(k.ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			dir := k.t.TempDir()
			for name, data := range s.Data {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o400); err != nil {
					return "", err
				}
			}
			return dir, nil
		}
	}
	return "", fmt.Errorf("no Secret volume mounted at %s", path)
}

func waitListening(addr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// freePort is a port free on 127.0.0.1 now.
func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// With a stand-in kubelet, the controllers reach the servers at the
// pods' addresses: a download reaches the disk through a data source pod
// and a manager pod, and the data source's pod goes once it is handed
// over.
func TestBackingImageServerPodsServeThroughASimulatedKubelet(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	dataDir := t.TempDir()
	ports := [2]int32{freePort(t), freePort(t)}
	removePodsAtEnd(t, kube, ns)
	startFakeKubelet(t, kube, ns)
	d := framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", dataDir, withPodRunner,
		func(o *app.DaemonOptions) { o.Hooks.BackingImagePodPorts = ports })
	lh := framework.LHClient(t, cluster.Config)
	var disks map[string]string
	framework.Eventually(t, 30*time.Second, "the default disk has a UUID", func() (bool, error) {
		node, err := lh.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		disks = map[string]string{}
		for name, st := range node.Status.DiskStatus {
			if st != nil && st.DiskUUID != "" {
				disks[st.DiskUUID] = node.Spec.Disks[name].Path
			}
		}
		return len(disks) == 1, nil
	})
	_, sum, url := framework.ServeImage(t, 1<<20)
	createDownloadImage(t, lh, ns, "kubelet", url, sum, disks)
	framework.WaitReady(t, lh, ns, "kubelet", disks, "")
	bims, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(bims.Items) != 1 || bims.Items[0].Status.IP != "127.0.0.1:"+strconv.Itoa(int(ports[1])) {
		t.Fatalf("managers %+v, %v: want one at the pod's address", bims, err)
	}
	framework.Eventually(t, 30*time.Second, "the data source's pod is deleted once its file was handed over", func() (bool, error) {
		_, ok := serverPods(t, kube, ns)[runner.ServerPodName("backing-image-data-source/kubelet")]
		return !ok, nil
	})
	d.Stop(t)
	// The manager's pod stays for the next daemon.
	if _, ok := serverPods(t, kube, ns)[runner.ServerPodName("backing-image-manager/"+bims.Items[0].Name)]; !ok {
		t.Error("the manager's pod went with the daemon")
	}
}
