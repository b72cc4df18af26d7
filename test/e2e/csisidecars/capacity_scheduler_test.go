//go:build e2e

package csisidecars

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	lhtypes "github.com/cadence-storage/longhorn-manager/types"
)

// notEnoughStorage is what kube-scheduler's volumebinding plugin says of
// a node whose CSIStorageCapacity objects have no room for a claim
// (ErrReasonNotEnoughSpace).
const notEnoughStorage = "did not have enough free storage"

// TestCSIStorageCapacitySteersTheScheduler proves end to end what
// TestCSIStorageCapacityPerNode leaves to Kubernetes: that the real
// kube-scheduler reads the CSIStorageCapacity objects the
// external-provisioner (--enable-capacity) keeps from the driver's
// GetCapacity, and so puts a pod whose claim is of a WaitForFirstConsumer
// StorageClass only on a node with room for it.
//
// The package's control plane runs no scheduler: this test starts one of
// its own with bin/controlplane --cluster (kube-scheduler in the process,
// the ServiceAccount admission plugin and the cluster's own token signing
// key), in its temporary folder, and stops it at the end. Two managers,
// node-1 and node-2, are two Kubernetes Nodes the test makes as a kubelet
// would register them (Ready, with allocatable cpu, memory and pods, no
// taints, the driver's topology label, a CSINode naming the driver and
// its topology key), and the CSIDriver is package/csi.yaml's
// (storageCapacity: true). No kubelet runs: a pod is only bound to a node,
// which is what the scheduler does.
//
//   - node-2 is full (its disk's reserved storage leaves it 6 MiB). A pod
//     with a 16 MiB claim, which prefers node-2 (a preferred node
//     affinity, so that a scheduler blind to capacity would choose it),
//     is bound to node-1: the scheduler sets the claim's
//     volume.kubernetes.io/selected-node to node-1, the provisioner makes
//     the volume there (its replica on node-1's disk), the claim binds,
//     and then the pod's spec.nodeName is node-1.
//   - node-1 made full too, a second pod with a second claim stays
//     Pending: its PodScheduled condition is False, Unschedulable, with
//     the volumebinding plugin's "did not have enough free storage", as
//     its FailedScheduling event says; its claim names no node and no
//     volume is made.
//   - node-2 given room again, the scheduler, woken by the object's
//     update, binds that pod to node-2, where its volume is made.
func TestCSIStorageCapacitySteersTheScheduler(t *testing.T) {
	started := time.Now()
	bins := csiSidecars(t)
	cp := schedulingControlPlane(t)
	s := newSidecarEnvOn(t, bins, apiEnvOn(t, cp), []string{"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s"})
	ctx := context.Background()
	// Pods bound to a node no kubelet runs on are deleted at once (a
	// graceful deletion would wait for the kubelet forever), before the
	// env's cleanup deletes the claims they hold.
	t.Cleanup(func() {
		zero := int64(0)
		_ = s.Kube.CoreV1().Pods(s.NS).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
	})
	framework.StartDaemon(t, cp.ServiceAccountConfig(s.NS, framework.ServiceAccount), s.NS, "node-2", t.TempDir())
	api := client.NewClient(s.Base+"/v1", 10*time.Second)
	for _, n := range []string{"node-1", "node-2"} {
		framework.Eventually(t, 30*time.Second, n+"'s disk probed", func() (bool, error) {
			node, err := api.Node(ctx, n)
			if client.IsNotFound(err) {
				return false, nil
			}
			return err == nil && node.Ready() && len(node.Disks) == 1 && diskOf(node).StorageMaximum > 0 && diskOf(node).Ready(), err
		})
	}
	// The pods' account, which the ServiceAccount admission plugin
	// requires (the serviceaccount controller makes it in a cluster).
	if _, err := s.Kube.CoreV1().ServiceAccounts(s.NS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	s.shippedCSIDriver(t)
	for _, n := range []string{"node-1", "node-2"} {
		s.schedulableNode(t, n)
	}

	const claimSize = 16 << 20
	s.leaveFree(t, "node-2", 6<<20)
	sc := s.storageClassWith(t, "wffc", map[string]string{"numberOfReplicas": "1"}, func(sc *storagev1.StorageClass) {
		mode := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &mode
	})
	s.expectRoom(t, sc, claimSize, map[string]bool{"node-1": true, "node-2": false})

	// node-2 full: the pod that prefers it goes to node-1.
	s.claimOf(t, "first", sc, claimSize)
	s.podPreferring(t, "first", "first", "node-2")
	framework.EventuallyAgree(t, sidecarWait, "the claim of pod first given a node by the scheduler", func() string {
		pvc, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "first", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if got := pvc.Annotations["volume.kubernetes.io/selected-node"]; got != "node-1" {
			return fmt.Sprintf("claim first's selected node is %q, want node-1; pod first: %s", got, s.podState(t, "first"))
		}
		return ""
	})
	pv := s.waitBoundOn(t, "first", "node-1")
	s.expectReplicasOn(t, s.volume(t, pv).Name, "node-1")
	s.expectPodOn(t, "first", "node-1")

	// node-1 full too: the second pod is not bound anywhere.
	s.leaveFree(t, "node-1", 6<<20)
	s.expectRoom(t, sc, claimSize, map[string]bool{"node-1": false, "node-2": false})
	volumesBefore := len(s.VolumeNames(t))
	s.claimOf(t, "second", sc, claimSize)
	s.podPreferring(t, "second", "second", "node-2")
	var message string
	framework.EventuallyAgree(t, sidecarWait, "pod second unschedulable for want of storage", func() string {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if pod.Spec.NodeName != "" {
			t.Fatalf("pod second was bound to %s, though no node has room for its claim", pod.Spec.NodeName)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, notEnoughStorage) {
				message = c.Message
				return ""
			}
		}
		return "pod second: " + s.podState(t, "second")
	})
	t.Logf("pod second's PodScheduled condition: %s", message)
	if !strings.Contains(message, "2 node(s) "+notEnoughStorage) {
		t.Errorf("pod second's PodScheduled condition %q: want both nodes refused for want of storage", message)
	}
	framework.EventuallyAgree(t, sidecarWait, "a FailedScheduling event on pod second naming storage", func() string {
		events, err := s.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": "second", "reason": "FailedScheduling"}.String()})
		if err != nil {
			return err.Error()
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, notEnoughStorage) {
				return ""
			}
		}
		return fmt.Sprintf("%d FailedScheduling events, none saying %q", len(events.Items), notEnoughStorage)
	})
	// It stays so: unbound, its claim Pending with no node, no volume.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, "second", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != "" || pvc.Annotations["volume.kubernetes.io/selected-node"] != "" || pvc.Status.Phase != corev1.ClaimPending {
			t.Fatalf("with no node of room, pod second is on %q and its claim %s with selected node %q", pod.Spec.NodeName, pvc.Status.Phase, pvc.Annotations["volume.kubernetes.io/selected-node"])
		}
	}
	if n := len(s.VolumeNames(t)); n != volumesBefore {
		t.Errorf("%d Volumes before claim second, %d after: a claim no node has room for made one", volumesBefore, n)
	}

	// node-2 given its room back, the scheduler binds the pod there.
	s.leaveFree(t, "node-2", -1)
	s.expectRoom(t, sc, claimSize, map[string]bool{"node-1": false, "node-2": true})
	pv = s.waitBoundOn(t, "second", "node-2")
	s.expectReplicasOn(t, s.volume(t, pv).Name, "node-2")
	s.expectPodOn(t, "second", "node-2")
	t.Logf("the scheduler's decisions proven in %s (control plane, managers and sidecars included)", time.Since(started).Round(time.Second))
}

// schedulingControlPlane starts a control plane of the test's own whose
// kube-scheduler runs (bin/controlplane --cluster), with the default
// controllers of the tests' control planes, in the test's temporary
// folder; it stops when the test ends, and a failed test shows the
// scheduler's lines of its log.
func schedulingControlPlane(t *testing.T) *testcluster.Cluster {
	t.Helper()
	testcluster.SkipIfShort(t, "a control plane")
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "controlplane.out"))
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "cp")
	cp, err := testcluster.Start(context.Background(), testcluster.Options{DataDir: dataDir, Log: logFile, ExtraArgs: []string{"--cluster"}})
	if err != nil {
		logFile.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Errorf("the test's control plane: %v", err)
		}
		logFile.Close()
		if t.Failed() {
			t.Logf("the scheduler's lines of the control plane's log (%s):\n%s", filepath.Join(dataDir, "controlplane.log"), schedulerLines(filepath.Join(dataDir, "controlplane.log"), 60))
		}
	})
	return cp
}

// schedulerLines are the last n lines of the control plane's log that
// come from kube-scheduler's packages.
func schedulerLines(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		if line := scanner.Text(); strings.Contains(line, "schedul") {
			lines = append(lines, line)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// apiEnvOn is framework.NewAPIEnv on the control plane cp: a namespace
// of its own, package/rbac.yaml's account and a manager on node-1
// running as it.
func apiEnvOn(t *testing.T, cp *testcluster.Cluster) *framework.APIEnv {
	t.Helper()
	kube := cp.KubeClient(t)
	ns := cp.NewNamespace(t)
	framework.InstallRBACIn(t, cp, kube, ns)
	d := framework.StartDaemon(t, cp.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())
	return &framework.APIEnv{
		ManagerEnv:         &framework.ManagerEnv{Cluster: cp, NS: ns, Kube: kube, LH: framework.LHClient(t, cp.Config)},
		Base:               "http://" + d.APIAddress,
		InstanceManagerDir: d.InstanceManagerDir,
	}
}

// shippedCSIDriver makes package/csi.yaml's CSIDriver, checked to ask the
// scheduler to read the capacity objects.
func (s *sidecarEnv) shippedCSIDriver(t *testing.T) {
	t.Helper()
	for _, obj := range framework.ReadManifests(t, "csi.yaml") {
		d, ok := obj.(*storagev1.CSIDriver)
		if !ok {
			continue
		}
		if d.Name != csi.DriverName || d.Spec.StorageCapacity == nil || !*d.Spec.StorageCapacity {
			t.Fatalf("package/csi.yaml's CSIDriver %s: storageCapacity %v, want %s's with true", d.Name, d.Spec.StorageCapacity, csi.DriverName)
		}
		if _, err := s.Kube.StorageV1().CSIDrivers().Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("package/csi.yaml has no CSIDriver")
}

// schedulableNode makes the Kubernetes node name, the Longhorn node of
// that name, as a kubelet registers it for the scheduler to consider:
// Ready, with room for pods and no taints, and its CSINode.
func (s *sidecarEnv) schedulableNode(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	status := corev1.NodeStatus{
		Capacity:    room,
		Allocatable: room,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "made by the test",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	s.kubeNodeOf(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: status}, name)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := s.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// The apiserver's TaintNodesByCondition admission taints a new
		// node not-ready; the node lifecycle controller, which no test
		// control plane runs, lifts it once the node is Ready.
		if len(node.Spec.Taints) > 0 {
			node.Spec.Taints = nil
			if node, err = s.Kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		// A Node's status is its own subresource: write it there too,
		// should the create have left it out.
		if node.Status.Allocatable.Pods().Value() > 0 && len(node.Status.Conditions) > 0 {
			return nil
		}
		node.Status = status
		_, err = s.Kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// leaveFree sets the reserved storage of the Longhorn node's disks so
// each has free bytes of room left (before what its replicas hold), as
// TestCSIStorageCapacityPerNode makes node-2 full; free -1 reserves
// nothing.
func (s *sidecarEnv) leaveFree(t *testing.T, node string, free int64) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := s.LH.LonghornV1beta2().Nodes(s.NS).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for name, st := range n.Status.DiskStatus {
			spec := n.Spec.Disks[name]
			spec.StorageReserved = 0
			if free >= 0 {
				spec.StorageReserved = st.StorageMaximum - free
			}
			n.Spec.Disks[name] = spec
		}
		_, err = s.LH.LonghornV1beta2().Nodes(s.NS).Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// expectRoom waits until the class's CSIStorageCapacity objects say of
// each node whether it takes a volume of size bytes.
func (s *sidecarEnv) expectRoom(t *testing.T, class string, size int64, fits map[string]bool) {
	t.Helper()
	framework.EventuallyAgree(t, sidecarWait, fmt.Sprintf("CSIStorageCapacity objects of %s saying which nodes take %d bytes, %v", class, size, fits), func() string {
		got := s.capacities(t)
		for node, fit := range fits {
			v, ok := got[capacityKey{class, node}]
			if !ok || (v.largest >= size) != fit {
				return "the objects: " + describe(got)
			}
		}
		return ""
	})
}

// podPreferring makes a pod using the claim that prefers the Kubernetes
// node prefer: a scheduler that did not read the capacity objects would
// choose it.
func (s *sidecarEnv) podPreferring(t *testing.T, name, claim, prefer string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
					Weight: 100,
					Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
						Key: hostnameKey, Operator: corev1.NodeSelectorOpIn, Values: []string{prefer},
					}}},
				}},
			}},
		},
	}
	if _, err := s.Kube.CoreV1().Pods(s.NS).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podState says where the pod is and its PodScheduled condition, for a
// failure's message.
func (s *sidecarEnv) podState(t *testing.T, name string) string {
	t.Helper()
	pod, err := s.Kube.CoreV1().Pods(s.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("node %q, PodScheduled %s %s: %s", pod.Spec.NodeName, c.Status, c.Reason, c.Message)
		}
	}
	return fmt.Sprintf("node %q, no PodScheduled condition", pod.Spec.NodeName)
}

// expectPodOn waits until the scheduler has bound the pod to the node,
// with its PodScheduled condition True.
func (s *sidecarEnv) expectPodOn(t *testing.T, name, node string) {
	t.Helper()
	framework.EventuallyAgree(t, sidecarWait, "pod "+name+" bound to "+node, func() string {
		pod, err := s.Kube.CoreV1().Pods(s.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != node {
			t.Fatalf("pod %s was bound to %s, want %s", name, pod.Spec.NodeName, node)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue && pod.Spec.NodeName == node {
				return ""
			}
		}
		return "pod " + name + ": " + s.podState(t, name)
	})
}

// expectReplicasOn checks that the volume's replicas are on the Longhorn
// node's disk, which counts their size as scheduled there.
func (s *sidecarEnv) expectReplicasOn(t *testing.T, volume, node string) {
	t.Helper()
	ctx := context.Background()
	n, err := s.LH.LonghornV1beta2().Nodes(s.NS).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	disks := map[string]bool{}
	for _, d := range n.Status.DiskStatus {
		disks[d.DiskUUID] = true
	}
	replicas, err := s.LH.LonghornV1beta2().Replicas(s.NS).List(ctx, metav1.ListOptions{LabelSelector: lhtypes.LabelVolume + "=" + volume})
	if err != nil {
		t.Fatal(err)
	}
	if len(replicas.Items) == 0 {
		t.Fatalf("volume %s has no replicas", volume)
	}
	for _, r := range replicas.Items {
		if r.Spec.NodeID != node || !disks[r.Spec.DiskID] {
			t.Errorf("replica %s of volume %s is on node %q disk %q, want %s's disk", r.Name, volume, r.Spec.NodeID, r.Spec.DiskID, node)
		}
	}
	// The disk counts what it holds: the room the next answer leaves out.
	framework.Eventually(t, 30*time.Second, fmt.Sprintf("%s's disk counting volume %s's replicas as scheduled", node, volume), func() (bool, error) {
		n, err := s.LH.LonghornV1beta2().Nodes(s.NS).Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range n.Status.DiskStatus {
			if d.DiskUUID == replicas.Items[0].Spec.DiskID {
				return d.StorageScheduled >= replicas.Items[0].Spec.VolumeSize, nil
			}
		}
		return false, nil
	})
}
