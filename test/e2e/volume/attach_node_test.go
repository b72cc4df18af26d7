//go:build e2e

package volume

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// volumeCondition returns the volume's condition of type condType, nil
// when it has none.
func volumeCondition(v *longhorn.Volume, condType string) *longhorn.Condition {
	for i := range v.Status.Conditions {
		if v.Status.Conditions[i].Type == condType {
			return &v.Status.Conditions[i]
		}
	}
	return nil
}

// Two daemons, each with its own data directory: a volume whose replicas
// are on node-1 is refused on node-2, by the API (naming node-1 and the
// replicas) and by the controller when spec.nodeID is written directly
// (the Volume's Attach condition says why, and node-2 creates nothing).
// It then attaches on node-1 and reads what was written there.
func TestAttachIsRefusedOnANodeWithoutTheReplicas(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()
	dir1, dir2 := t.TempDir(), t.TempDir()

	// Only node-1 runs while the volume is created: its replicas are on
	// node-1's disk.
	d1 := framework.StartDaemon(t, cfg, ns, "node-1", dir1)
	e1 := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: lh}, Base: "http://" + d1.APIAddress}
	e1.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":2}`).Expect(t, 200)
	e1.WaitVolume(t, "vol", "detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	var replicas []longhorn.Replica
	framework.Eventually(t, 20*time.Second, "two replicas", func() (bool, error) {
		list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		replicas = list.Items
		return len(replicas) == 2, nil
	})
	for _, r := range replicas {
		if r.Spec.NodeID != "node-1" || r.Spec.DiskPath != dir1 {
			t.Fatalf("replica %s on %s at %s, want node-1 at %s", r.Name, r.Spec.NodeID, r.Spec.DiskPath, dir1)
		}
	}
	e1.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e1.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 1M", "flush")
	e1.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e1.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })

	d2 := framework.StartDaemon(t, cfg, ns, "node-2", dir2)
	e2 := &framework.APIEnv{ManagerEnv: e1.ManagerEnv, Base: "http://" + d2.APIAddress}
	for _, e := range []*framework.APIEnv{e1, e2} {
		framework.Eventually(t, 20*time.Second, "node-2 known to "+e.Base, func() (bool, error) {
			return e.Call(t, "GET", "/v1/nodes/node-2", "").Status == 200, nil
		})
	}

	// The API refuses node-2, whichever manager is asked, and says where
	// the replicas are.
	for _, e := range []*framework.APIEnv{e1, e2} {
		e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-2"}`).Expect(t, 409,
			`cannot be attached to node \"node-2\"`, `node \"node-1\" (vol-r-0, vol-r-1)`, `attach it to \"node-1\"`)
	}
	if got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{}); err != nil || got.Spec.NodeID != "" {
		t.Fatalf("after the refused attach: %v, nodeID %q", err, got.Spec.NodeID)
	}

	// spec.nodeID written with kubectl: the controller refuses it.
	setNodeID := func(node string) {
		t.Helper()
		err := datastore.RetryOnConflict(func() error {
			got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Spec.NodeID = node
			_, err = lh.LonghornV1beta2().Volumes(ns).Update(ctx, got, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setNodeID("node-2")
	var cond *longhorn.Condition
	framework.Eventually(t, 20*time.Second, "the Attach condition says why", func() (bool, error) {
		got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Status == longhorn.ConditionStatusFalse, nil
	})
	if cond.Reason != "ReplicasOnOtherNode" || !strings.Contains(cond.Message, `node "node-1" (vol-r-0, vol-r-1)`) {
		t.Errorf("Attach condition %+v", cond)
	}
	// For a while: nothing runs on node-2 and nothing is created there.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State != longhorn.VolumeStateDetached || got.Status.CurrentNodeID != "" {
			t.Fatalf("volume %s on %q with its replicas elsewhere", got.Status.State, got.Status.CurrentNodeID)
		}
		eng, err := lh.LonghornV1beta2().Engines(ns).Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if eng.Status.CurrentState == longhorn.InstanceStateRunning || eng.Status.Endpoint != "" {
			t.Fatalf("engine status %+v", eng.Status)
		}
		list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 2 {
			t.Fatalf("%d replicas", len(list.Items))
		}
		for _, r := range list.Items {
			if r.Spec.NodeID != "node-1" {
				t.Fatalf("replica %s on %s", r.Name, r.Spec.NodeID)
			}
		}
		if _, err := os.Stat(filepath.Join(dir2, "replicas")); !os.IsNotExist(err) {
			t.Fatalf("node-2's disk has a replicas folder: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Back to node-1, through node-2's API: the data is there.
	setNodeID("")
	e2.WaitVolume(t, "vol", "detached with no node", func(v map[string]any) bool { return v["state"] == "detached" && v["nodeID"] == "" })
	e2.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e2.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == "node-1" && v["endpoint"] != ""
	})
	want := make([]byte, 4<<20)
	copy(want, bytes.Repeat([]byte{0x5a}, 1<<20))
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume on node-1 does not read what was written")
	}
	got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := volumeCondition(got, "Attach"); c == nil || c.Status != longhorn.ConditionStatusTrue {
		t.Errorf("Attach condition once attached: %+v", c)
	}
}

// A replica whose data vanished from its disk is an error, never a new,
// empty replica: the volume does not attach and says which replica.
func TestAReplicaWhoseDataVanishedIsAnError(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":2}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x33 0 1M", "flush")
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })

	r, err := e.LH.LonghornV1beta2().Replicas(e.NS).Get(ctx, "vol-r-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	var cond *longhorn.Condition
	framework.Eventually(t, 20*time.Second, "the Attach condition names the replica", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Status == longhorn.ConditionStatusFalse, nil
	})
	if cond.Reason != "ReplicaDataMissing" || !strings.Contains(cond.Message, "vol-r-1") || !strings.Contains(cond.Message, dir) {
		t.Errorf("Attach condition %+v", cond)
	}
	framework.Eventually(t, 20*time.Second, "replica vol-r-1 in error", func() (bool, error) {
		r, err := e.LH.LonghornV1beta2().Replicas(e.NS).Get(ctx, "vol-r-1", metav1.GetOptions{})
		return err == nil && r.Status.CurrentState == longhorn.InstanceStateError, err
	})
	got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.State == longhorn.VolumeStateAttached {
		t.Fatal("the volume attached with a replica whose data is gone")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the replica's folder %s was created again: %v", dir, err)
	}

	// A replica that names a disk the node does not have is refused too.
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["nodeID"] == "" })
	err = datastore.RetryOnConflict(func() error {
		r, err := e.LH.LonghornV1beta2().Replicas(e.NS).Get(ctx, "vol-r-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r.Spec.DiskID = "no-such-disk"
		_, err = e.LH.LonghornV1beta2().Replicas(e.NS).Update(ctx, r, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	framework.Eventually(t, 20*time.Second, "the Attach condition names the disk", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Reason == "ReplicaDiskMissing", nil
	})
	if cond.Status != longhorn.ConditionStatusFalse || !strings.Contains(cond.Message, "replica vol-r-0 is on disk no-such-disk") {
		t.Errorf("Attach condition %+v", cond)
	}
}
