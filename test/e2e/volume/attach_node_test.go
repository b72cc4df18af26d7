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
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
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
// are on node-1 attaches on node-2, whose engine reaches them over the
// replica protocol where node-1 serves them (the Replicas' storageIP and
// port say where). While node-1 is down it waits, and the Attach
// condition names the replicas not served; once node-1 is back the engine
// on node-2 reads what was written on node-1 and writes more, with the
// volume's next term; node-1 stops serving at the detach and then reads
// everything itself. Nothing is created on node-2's disk.
func TestAVolumeAttachesOnANodeWithoutItsReplicas(t *testing.T) {
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
	replicas := func() []longhorn.Replica {
		t.Helper()
		list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	framework.Eventually(t, 20*time.Second, "two replicas", func() (bool, error) { return len(replicas()) == 2, nil })
	for _, r := range replicas() {
		if r.Spec.NodeID != "node-1" || r.Spec.DiskPath != dir1 {
			t.Fatalf("replica %s on %s at %s, want node-1 at %s", r.Name, r.Spec.NodeID, r.Spec.DiskPath, dir1)
		}
	}
	e1.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e1.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 1M", "flush")
	e1.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e1.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	termBefore := volumeTerm(t, lh, ns)

	d2 := framework.StartDaemon(t, cfg, ns, "node-2", dir2)
	e2 := &framework.APIEnv{ManagerEnv: e1.ManagerEnv, Base: "http://" + d2.APIAddress}
	framework.Eventually(t, 20*time.Second, "node-2 known to node-1's API", func() (bool, error) {
		return e1.Call(t, "GET", "/v1/nodes/node-2", "").Status == 200, nil
	})

	// node-1 down: the volume attached to node-2 waits, saying which
	// replicas are not served.
	d1.Stop(t)
	e2.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-2"}`).Expect(t, 200)
	var cond *longhorn.Condition
	framework.Eventually(t, 20*time.Second, "the Attach condition says which replicas are not served", func() (bool, error) {
		got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Status == longhorn.ConditionStatusFalse && cond.Reason == "ReplicasNotServed", nil
	})
	if !strings.Contains(cond.Message, `vol-r-0 (node "node-1")`) || !strings.Contains(cond.Message, `vol-r-1 (node "node-1")`) {
		t.Errorf("Attach condition %+v", cond)
	}

	// node-1 back: it serves them, and node-2's engine reads and writes.
	d1 = framework.StartDaemon(t, cfg, ns, "node-1", dir1)
	v = e2.WaitVolume(t, "vol", "attached on node-2", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == "node-2" && v["endpoint"] != ""
	})
	for _, r := range replicas() {
		if r.Status.StorageIP == "" || r.Status.Port == 0 {
			t.Errorf("replica %s served, but its status says not where: %+v", r.Name, r.Status)
		}
	}
	want := make([]byte, 4<<20)
	copy(want, bytes.Repeat([]byte{0x5a}, 1<<20))
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume on node-2 does not read what was written on node-1")
	}
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x77 1M 1M", "flush")
	copy(want[1<<20:], bytes.Repeat([]byte{0x77}, 1<<20))
	if term := volumeTerm(t, lh, ns); term <= termBefore {
		t.Errorf("term %d after the start on node-2, %d before: want a higher one", term, termBefore)
	}
	eng, err := lh.LonghornV1beta2().Engines(ns).Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := eng.Status.ReplicaModeMap; m["vol-r-0"] != longhorn.ReplicaModeRW || m["vol-r-1"] != longhorn.ReplicaModeRW {
		t.Errorf("replica modes %v: want both RW", m)
	}
	if _, err := os.Stat(filepath.Join(dir2, "replicas")); !os.IsNotExist(err) {
		t.Fatalf("node-2's disk has a replicas folder: %v", err)
	}

	// Detached: node-1 stops serving; attached there, it reads it all.
	e2.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e2.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" && v["nodeID"] == "" })
	framework.Eventually(t, 20*time.Second, "node-1 no longer serves the replicas", func() (bool, error) {
		for _, r := range replicas() {
			if r.Status.Port != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	e2.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e2.WaitVolume(t, "vol", "attached on node-1", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == "node-1" && v["endpoint"] != ""
	})
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume on node-1 does not read what node-2 wrote")
	}
	got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := volumeCondition(got, "Attach"); c == nil || c.Status != longhorn.ConditionStatusTrue {
		t.Errorf("Attach condition once attached: %+v", c)
	}
}

func volumeTerm(t *testing.T, lh lhclientset.Interface, ns string) int64 {
	t.Helper()
	got, err := lh.LonghornV1beta2().Volumes(ns).Get(context.Background(), "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Term
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
