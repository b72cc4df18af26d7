//go:build e2e

package csisidecars

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// capacityKey is one CSIStorageCapacity object's StorageClass and node
// (the value of its topology's hostname label).
type capacityKey struct{ class, node string }

// capacityValue is what an object says: its capacity and the largest
// volume, in bytes (-1 when it gives none).
type capacityValue struct{ capacity, largest int64 }

// TestCSIStorageCapacityPerNode runs the external-provisioner with
// --enable-capacity, as package/csi.yaml does, against two managers,
// node-1 and node-2, each a Kubernetes node whose CSINode names the
// driver with its topology key, as the kubelet registers it. node-2 is
// full: its disk's reserved storage leaves it 6 MiB. For each
// WaitForFirstConsumer StorageClass and each node there is one
// CSIStorageCapacity object, saying the room the manager counts on that
// node's disk (its size less its reserved storage, times
// storage-over-provisioning-percentage, less the replicas it holds) for
// a volume of the class's replicas: node-2's is less than a 16 MiB
// claim (none), node-1's is, and a class of two replicas has half of it.
// An Immediate class, which the scheduler does not ask about, gets none.
// The objects follow the setting, and a claim placed on node-1 (the
// node the scheduler chose, as its annotation says) takes its size from
// node-1's room, which its disk's storageScheduled shows.
//
// No kube-scheduler runs here (the claim's node is set by hand, as the
// scheduler sets it): that the real kube-scheduler reads these objects,
// and so puts a pod with such a claim only on a node with room, and
// leaves it Pending when no node has any, is
// TestCSIStorageCapacitySteersTheScheduler's, on a control plane of its
// own that runs one (capacity_scheduler_test.go).
func TestCSIStorageCapacityPerNode(t *testing.T) {
	s := newSidecarEnvWith(t, []string{"--enable-capacity", "--capacity-ownerref-level=-1", "--capacity-poll-interval=2s"})
	ctx := context.Background()
	framework.StartDaemon(t, s.Cluster.ServiceAccountConfig(s.NS, framework.ServiceAccount), s.NS, "node-2", t.TempDir())
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

	// node-2 is full: reserved storage leaves it 6 MiB.
	lhNode, err := s.LH.LonghornV1beta2().Nodes(s.NS).Get(ctx, "node-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range lhNode.Status.DiskStatus {
		spec := lhNode.Spec.Disks[name]
		spec.StorageReserved = st.StorageMaximum - 6<<20
		lhNode.Spec.Disks[name] = spec
	}
	if _, err := s.LH.LonghornV1beta2().Nodes(s.NS).Update(ctx, lhNode, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	s.kubeNode(t, s.prefix+"-n1", "node-1")
	s.kubeNode(t, s.prefix+"-n2", "node-2")
	wffc := func(sc *storagev1.StorageClass) {
		mode := storagev1.VolumeBindingWaitForFirstConsumer
		sc.VolumeBindingMode = &mode
	}
	one := s.storageClassWith(t, "one", map[string]string{"numberOfReplicas": "1"}, wffc)
	two := s.storageClassWith(t, "two", map[string]string{"numberOfReplicas": "2"}, wffc)
	immediate := s.storageClass(t, "immediate", map[string]string{})
	replicas := map[string]int{one: 1, two: 2}

	// want is what the objects should say now, from the nodes as the API
	// shows them and the setting.
	want := func(percent int64) map[capacityKey]capacityValue {
		out := map[capacityKey]capacityValue{}
		for _, n := range []string{"node-1", "node-2"} {
			node, err := api.Node(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			d := diskOf(node)
			room := (d.StorageMaximum-d.StorageReserved)/100*percent - d.StorageScheduled
			for class, r := range replicas {
				size := room / int64(r) / (2 << 20) * (2 << 20)
				if size < 10<<20 {
					size = 0
				}
				out[capacityKey{class, n}] = capacityValue{size, size}
			}
		}
		return out
	}
	expectObjects := func(what string, percent int64) map[capacityKey]capacityValue {
		t.Helper()
		var got, wanted map[capacityKey]capacityValue
		deadline := time.Now().Add(sidecarWait)
		for {
			got = s.capacities(t)
			wanted = want(percent)
			if fmt.Sprint(got) == fmt.Sprint(wanted) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: CSIStorageCapacity objects %s, want %s", what, describe(got), describe(wanted))
			}
			time.Sleep(500 * time.Millisecond)
		}
	}

	got := expectObjects("two nodes, node-2 full", 100)
	const claimSize = 16 << 20
	if full := got[capacityKey{one, "node-2"}]; full.largest >= claimSize {
		t.Errorf("full node-2 says it takes a volume of %d bytes, not less than a claim of %d", full.largest, claimSize)
	}
	if free := got[capacityKey{one, "node-1"}]; free.largest < claimSize || got[capacityKey{two, "node-1"}].largest*2 > free.largest {
		t.Errorf("node-1 takes volumes of %d bytes of one replica and %d of two: want at least the claim's %d, and half for two", free.largest, got[capacityKey{two, "node-1"}].largest, claimSize)
	}
	for k := range got {
		if k.class == immediate {
			t.Errorf("an object for the Immediate class %s: %v", immediate, got[k])
		}
	}

	// Half the over-provisioning, half the room.
	s.Call(t, "PUT", "/v1/settings/storage-over-provisioning-percentage", `{"value":"50"}`).Expect(t, 200)
	halved := expectObjects("storage-over-provisioning-percentage 50", 50)
	if h, f := halved[capacityKey{one, "node-1"}].largest, got[capacityKey{one, "node-1"}].largest; h > f/2+(2<<20) || h < f/2-(4<<20) {
		t.Errorf("with half the over-provisioning node-1 takes %d bytes, not about half of %d", h, f)
	}
	s.Call(t, "PUT", "/v1/settings/storage-over-provisioning-percentage", `{"value":"100"}`).Expect(t, 200)
	expectObjects("storage-over-provisioning-percentage 100 again", 100)

	// A claim the scheduler put on node-1 (its annotation, on the
	// Kubernetes node) is provisioned there, and node-1's room is the
	// claim's size less.
	s.claimOf(t, "placed", one, claimSize)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"volume.kubernetes.io/selected-node":%q}}}`, s.prefix+"-n1")
	if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Patch(ctx, "placed", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := s.waitBound(t, "placed")
	if v := s.volume(t, pv); v.Spec.Size != claimSize {
		t.Fatalf("volume %s: %d bytes, want %d", v.Name, v.Spec.Size, claimSize)
	}
	framework.Eventually(t, 30*time.Second, "node-1's disk showing the claim's replica scheduled", func() (bool, error) {
		node, err := api.Node(ctx, "node-1")
		return err == nil && diskOf(node).StorageScheduled == claimSize, err
	})
	after := expectObjects("a claim placed on node-1", 100)
	if a, b := after[capacityKey{one, "node-1"}].largest, got[capacityKey{one, "node-1"}].largest; a != b-claimSize {
		t.Errorf("node-1 takes a volume of %d bytes after the claim, %d before: want the claim's %d less", a, b, claimSize)
	}
}

// diskOf is the node's one disk.
func diskOf(n *client.Node) client.NodeDisk {
	for _, d := range n.Disks {
		return d
	}
	return client.NodeDisk{}
}

// capacities are the CSIStorageCapacity objects of the test's namespace,
// each by its StorageClass and node; an object whose topology is not one
// node's hostname is a test failure.
func (s *sidecarEnv) capacities(t *testing.T) map[capacityKey]capacityValue {
	t.Helper()
	list, err := s.Kube.StorageV1().CSIStorageCapacities(s.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[capacityKey]capacityValue{}
	for _, c := range list.Items {
		topo := c.NodeTopology
		if topo == nil || len(topo.MatchExpressions) != 0 || len(topo.MatchLabels) != 1 || topo.MatchLabels[hostnameKey] == "" {
			t.Fatalf("CSIStorageCapacity %s's topology is %v, not one node's %s", c.Name, topo, hostnameKey)
		}
		v := capacityValue{-1, -1}
		if c.Capacity != nil {
			v.capacity = c.Capacity.Value()
		}
		if c.MaximumVolumeSize != nil {
			v.largest = c.MaximumVolumeSize.Value()
		}
		out[capacityKey{c.StorageClassName, topo.MatchLabels[hostnameKey]}] = v
	}
	return out
}

func describe(m map[capacityKey]capacityValue) string {
	var lines []string
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("%s on %s: capacity %d, largest volume %d", k.class, k.node, v.capacity, v.largest))
	}
	sort.Strings(lines)
	return "[" + strings.Join(lines, "; ") + "]"
}
