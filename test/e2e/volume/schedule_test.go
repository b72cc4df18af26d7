//go:build e2e

package volume

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Three daemons as three nodes, with Longhorn's default of hard node
// anti-affinity: a volume of three replicas gets one on each node's disk;
// attached on one node, its engine writes to all three (the other two
// over the replica protocol) and reads back; a fourth replica finds no
// node of its own and stays unscheduled, the volume's Scheduled condition
// naming the rule on each node; a strict-local volume has one replica
// and attaches only on its node; deleting the volume, attached, deletes
// each replica's data on its own node.
func TestReplicasArePlacedOnNodesOfTheirOwn(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 3)
	e, lh, ns, dirs, ctx := n.api, n.lh, n.ns, n.dirs, context.Background()
	replicas := n.spreadVolume(t, "vol", 3)

	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x6b 0 2M", "flush")
	want := make([]byte, 4<<20)
	copy(want, bytes.Repeat([]byte{0x6b}, 2<<20))
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read back what was written")
	}
	framework.Eventually(t, 20*time.Second, "the engine writes to all three replicas", func() (bool, error) {
		eng, err := lh.LonghornV1beta2().Engines(ns).Get(ctx, "vol-e-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rw := 0
		for _, m := range eng.Status.ReplicaModeMap {
			if m == longhorn.ReplicaModeRW {
				rw++
			}
		}
		return rw == 3, nil
	})

	// A fourth replica has no node of its own.
	e.Call(t, "POST", "/v1/volumes", `{"name":"four","size":"4Mi","numberOfReplicas":4}`).Expect(t, 200)
	var cond *longhorn.Condition
	framework.Eventually(t, 20*time.Second, "the Scheduled condition of a volume of four replicas on three nodes", func() (bool, error) {
		got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "four", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Scheduled")
		return cond != nil && cond.Status == longhorn.ConditionStatusFalse, nil
	})
	if cond.Reason != "ReplicaSchedulingFailure" || !strings.Contains(cond.Message, "3 of the 4 replicas") ||
		strings.Count(cond.Message, "node anti-affinity is hard (replica-soft-anti-affinity)") != 3 {
		t.Errorf("Scheduled condition %+v", cond)
	}

	// strict-local: one replica, attached only on its node.
	e.Call(t, "POST", "/v1/volumes", `{"name":"wide","size":"4Mi","numberOfReplicas":2,"dataLocality":"strict-local"}`).Expect(t, 400, "numberOfReplicas must be 1")
	e.Call(t, "POST", "/v1/volumes", `{"name":"local","size":"4Mi","numberOfReplicas":1,"dataLocality":"strict-local"}`).Expect(t, 200)
	var local longhorn.Replica
	framework.Eventually(t, 20*time.Second, "the strict-local volume's replica", func() (bool, error) {
		list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{LabelSelector: types.LabelVolume + "=local"})
		if err != nil || len(list.Items) != 1 {
			return false, err
		}
		local = list.Items[0]
		return true, nil
	})
	other := "node-1"
	if local.Spec.NodeID == other {
		other = "node-2"
	}
	e.Call(t, "POST", "/v1/volumes/local?action=attach", fmt.Sprintf(`{"hostId":%q}`, other)).Expect(t, 409, "strict-local")
	e.Call(t, "POST", "/v1/volumes/local?action=attach", fmt.Sprintf(`{"hostId":%q}`, local.Spec.NodeID)).Expect(t, 200)
	e.WaitVolume(t, "local", "attached on its replica's node", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == local.Spec.NodeID && v["dataLocality"] == "strict-local"
	})

	// Deleted while attached: every node deletes its replica's data.
	e.Call(t, "DELETE", "/v1/volumes/vol", "").Expect(t, 204)
	framework.Eventually(t, 30*time.Second, "the volume gone", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes/vol", "").Status == 404, nil
	})
	for _, r := range replicas {
		dir := filepath.Join(dirs[r.Spec.NodeID], "replicas", r.Spec.DataDirectoryName)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("replica %s's data %s on node %s after the volume's deletion: %v", r.Name, dir, r.Spec.NodeID, err)
		}
	}
}

// nodes are managers started as nodes of one cluster, with Longhorn's
// hard node anti-affinity.
type nodes struct {
	api     *framework.APIEnv
	lh      lhclientset.Interface
	ns      string
	dirs    map[string]string
	daemons map[string]*framework.RunningDaemon
}

func startNodes(t *testing.T, count int, opts ...func(*app.DaemonOptions)) *nodes {
	t.Helper()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()
	hard := func(o *app.DaemonOptions) {
		o.DefaultSettings = framework.TestDefaultSettings()
		o.DefaultSettings[types.SettingNameReplicaSoftAntiAffinity] = "false"
	}
	n := &nodes{lh: lh, ns: ns, dirs: map[string]string{}, daemons: map[string]*framework.RunningDaemon{}}
	for i := 1; i <= count; i++ {
		node := fmt.Sprintf("node-%d", i)
		n.dirs[node] = t.TempDir()
		n.daemons[node] = framework.StartDaemon(t, cfg, ns, node, n.dirs[node], append([]func(*app.DaemonOptions){hard}, opts...)...)
	}
	n.api = &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: lh}, Base: "http://" + n.daemons["node-1"].APIAddress}
	framework.Eventually(t, 30*time.Second, "the nodes with a probed disk", func() (bool, error) {
		list, err := lh.LonghornV1beta2().Nodes(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != count {
			return false, err
		}
		for _, n := range list.Items {
			probed := false
			for _, st := range n.Status.DiskStatus {
				probed = probed || st.StorageMaximum > 0
			}
			if !probed {
				return false, nil
			}
		}
		return true, nil
	})
	return n
}

// spreadVolume creates a volume of count replicas and checks that each is
// on a node of its own, on that node's disk.
func (n *nodes) spreadVolume(t *testing.T, name string, count int) []longhorn.Replica {
	t.Helper()
	return n.spreadVolumeWith(t, name, count, "")
}

// spreadVolumeWith is spreadVolume with more fields of the create's body
// (",\"field\":value...").
func (n *nodes) spreadVolumeWith(t *testing.T, name string, count int, more string) []longhorn.Replica {
	t.Helper()
	ctx := context.Background()
	n.api.Call(t, "POST", "/v1/volumes", fmt.Sprintf(`{"name":%q,"size":"4Mi","numberOfReplicas":%d%s}`, name, count, more)).Expect(t, 200)
	n.api.WaitVolume(t, name, "detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	var replicas []longhorn.Replica
	framework.Eventually(t, 20*time.Second, "the volume's replicas", func() (bool, error) {
		list, err := n.lh.LonghornV1beta2().Replicas(n.ns).List(ctx, metav1.ListOptions{LabelSelector: types.LabelVolume + "=" + name})
		if err != nil {
			return false, err
		}
		replicas = list.Items
		return len(replicas) == count, nil
	})
	seen := map[string]string{}
	for _, r := range replicas {
		if other, ok := seen[r.Spec.NodeID]; ok {
			t.Fatalf("replicas %s and %s are both on node %s", other, r.Name, r.Spec.NodeID)
		}
		seen[r.Spec.NodeID] = r.Name
		if r.Spec.DiskPath != n.dirs[r.Spec.NodeID] {
			t.Errorf("replica %s on node %s at %s, want that node's disk %s", r.Name, r.Spec.NodeID, r.Spec.DiskPath, n.dirs[r.Spec.NodeID])
		}
	}
	return replicas
}

// A volume of three replicas on three nodes, one of them down: attached,
// its engine starts without that node's replica, which is marked failed
// (NodeDown), its data kept, and the volume reads what it held and
// writes, degraded, rather than waiting for the node.
func TestAVolumeAttachesWithoutTheReplicaOfANodeThatIsDown(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 3)
	e, lh, ns, ctx := n.api, n.lh, n.ns, context.Background()
	replicas := n.spreadVolume(t, "vol", 3)
	onNode3 := ""
	for _, r := range replicas {
		if r.Spec.NodeID == "node-3" {
			onNode3 = r.Name
		}
	}
	// Written once with all three, so each replica has data.
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x11 1M 1M", "flush")
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })

	// Its heartbeat Lease goes stale 40 s after its last renewal.
	n.daemons["node-3"].Stop(t)
	framework.Eventually(t, 60*time.Second, "node-3 down", func() (bool, error) {
		got, err := lh.LonghornV1beta2().Nodes(ns).Get(ctx, "node-3", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == longhorn.ConditionTypeReady {
				return c.Status == longhorn.ConditionStatusFalse, nil
			}
		}
		return false, nil
	})
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "vol", "attached on node-1, degraded", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != "" && v["robustness"] == "degraded"
	})
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x3c 0 1M", "flush")
	want := make([]byte, 4<<20)
	copy(want, bytes.Repeat([]byte{0x3c}, 1<<20))
	copy(want[1<<20:], bytes.Repeat([]byte{0x11}, 1<<20))
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the degraded volume does not read back what was written, before and after")
	}
	r, err := lh.LonghornV1beta2().Replicas(ns).Get(ctx, onNode3, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cond := kit.GetCondition(r.Status.Conditions, longhorn.ReplicaConditionTypeFailed)
	if r.Spec.FailedAt == "" || cond.Reason != longhorn.ReplicaConditionReasonNodeDown || !strings.Contains(cond.Message, "node-3") {
		t.Errorf("replica %s of node-3: failedAt %q, Failed condition %+v", onNode3, r.Spec.FailedAt, cond)
	}
	if _, err := os.Stat(filepath.Join(n.dirs["node-3"], "replicas", r.Spec.DataDirectoryName)); err != nil {
		t.Errorf("the data of the replica of node-3, which is down: %v", err)
	}
}

// A volume on a backing image, its two replicas on two nodes: each node's
// disk gets the image's file, and the replica of the node the engine does
// not run on is served over the replica protocol on top of its own node's
// file, so the volume reads the image and what was written from either
// node.
func TestAVolumeOnABackingImageSpreadsOverNodes(t *testing.T) {
	t.Parallel()
	n := startNodes(t, 2, framework.WithTestServers)
	e, ctx := n.api, context.Background()
	image, sum, url := framework.ServeImage(t, 1<<20)
	e.Call(t, "POST", "/v1/backingimages", `{"name":"img","sourceType":"download","parameters":{"url":"`+url+`"},"expectedChecksum":"`+sum+`"}`).Expect(t, 200)
	replicas := n.spreadVolumeWith(t, "vm", 2, `,"backingImage":"img"`)
	for _, r := range replicas {
		if r.Spec.BackingImage != "img" {
			t.Fatalf("replica %s: backing image %q", r.Name, r.Spec.BackingImage)
		}
	}
	want := make([]byte, 4<<20)
	copy(want, image)
	for i, node := range []string{"node-1", "node-2"} {
		e.Call(t, "POST", "/v1/volumes/vm?action=attach", fmt.Sprintf(`{"hostId":%q}`, node)).Expect(t, 200)
		v := e.WaitVolumeFor(t, 180*time.Second, "vm", "attached on "+node, func(v map[string]any) bool {
			return v["state"] == "attached" && v["currentNodeID"] == node && v["endpoint"] != ""
		})
		if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
			t.Fatalf("the volume on %s does not read the image and what was written before", node)
		}
		off := (2 + i) << 20
		framework.QemuIO(t, v["endpoint"].(string), fmt.Sprintf("write -P 0x%x %d 512k", 0x40+i, off), "flush")
		copy(want[off:], bytes.Repeat([]byte{byte(0x40 + i)}, 512<<10))
		e.Call(t, "POST", "/v1/volumes/vm?action=detach", "").Expect(t, 200)
		e.WaitVolume(t, "vm", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	}
	bi, err := n.lh.LonghornV1beta2().BackingImages(n.ns).Get(ctx, "img", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range replicas {
		if st := bi.Status.DiskFileStatusMap[r.Spec.DiskID]; st == nil || st.State != longhorn.BackingImageStateReady {
			t.Errorf("the image's file on the disk of %s (node %s): %+v", r.Name, r.Spec.NodeID, st)
		}
	}
}
