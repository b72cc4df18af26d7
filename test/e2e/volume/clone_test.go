//go:build e2e

package volume

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestAVolumeClonedFromASnapshotOrAVolumeHoldsItsBytes: a volume created
// with Longhorn's dataSource holds the bytes of its source: snap:// the
// snapshot's (the source written since keeps its new bytes, the clone has
// the snapshot's), vol:// the source's as it is, from a snapshot the
// clone takes, whether the source is attached or detached (its engine
// then runs for the clone only, and stops after). A clone larger than its
// source reads zeros past it. The source is never written.
func TestAVolumeClonedFromASnapshotOrAVolumeHoldsItsBytes(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	const size = 16 << 20
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"16Mi","numberOfReplicas":2}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	endpoint := e.WaitVolume(t, "src", "src attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0xab 0 1M", "write -P 0x11 10M 3M", "write -P 0x5a 16773120 4096", "flush")
	atSnapshot := make([]byte, size)
	framework.Fill(atSnapshot, 0xab, 0, 1<<20)
	framework.Fill(atSnapshot, 0x11, 10<<20, 3<<20)
	framework.Fill(atSnapshot, 0x5a, size-4096, 4096)
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	framework.QemuIO(t, endpoint, "write -P 0xcd 0 2M", "flush")
	now := bytes.Clone(atSnapshot)
	framework.Fill(now, 0xcd, 0, 2<<20)
	e.WaitSnapshotReady(t, "s1")

	e.Call(t, "POST", "/v1/volumes", `{"name":"from-snap","size":"16Mi","numberOfReplicas":2,"dataSource":"snap://src/s1"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes", `{"name":"from-vol","size":"20Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).Expect(t, 200)
	for _, name := range []string{"from-snap", "from-vol"} {
		v := e.WaitCloned(t, name)
		cs := v["cloneStatus"].(map[string]any)
		if cs["sourceVolume"] != "src" || cs["snapshot"] == "" {
			t.Errorf("%s: cloneStatus %v", name, cs)
		}
	}
	if got := e.AttachedContent(t, "from-snap"); !bytes.Equal(got, atSnapshot) {
		t.Error("the clone of snapshot s1 does not hold the snapshot's bytes")
	}
	if got := e.AttachedContent(t, "from-vol"); !bytes.Equal(got[:size], now) || !bytes.Equal(got[size:], make([]byte, 4<<20)) {
		t.Error("the clone of volume src does not hold its bytes, then zeros")
	}
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, now) {
		t.Error("the clones changed their source")
	}
	// The vol:// clone's snapshot of the source is there, labelled for it.
	cs := e.Call(t, "GET", "/v1/volumes/from-vol", "").Body["cloneStatus"].(map[string]any)
	snap := e.Call(t, "POST", "/v1/volumes/src?action=snapshotGet", fmt.Sprintf(`{"name":%q}`, cs["snapshot"])).Expect(t, 200)
	if snap.Body["labels"].(map[string]any)["longhorn.io/for-cloning-volume"] != "from-vol" {
		t.Errorf("the snapshot a vol:// clone took: %s", snap.Raw)
	}

	// A detached source: its engine runs for the clone, then stops.
	e.Call(t, "POST", "/v1/volumes/src?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "src", "src detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes", `{"name":"from-detached","size":"16Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).Expect(t, 200)
	e.WaitCloned(t, "from-detached")
	e.WaitVolume(t, "src", "src detached again after the clone", func(v map[string]any) bool { return v["state"] == "detached" && v["endpoint"] == "" })
	if got := e.AttachedContent(t, "from-detached"); !bytes.Equal(got, now) {
		t.Error("the clone of detached volume src does not hold its bytes")
	}
	if got := e.AttachedContent(t, "src"); !bytes.Equal(got, now) {
		t.Error("a clone changed its detached source")
	}

	// A clone of a clone made at once waits until its source is complete.
	e.Call(t, "POST", "/v1/volumes", `{"name":"chain-1","size":"16Mi","numberOfReplicas":1,"dataSource":"snap://src/s1"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes", `{"name":"chain-2","size":"16Mi","numberOfReplicas":1,"dataSource":"vol://chain-1"}`).Expect(t, 200)
	e.WaitCloned(t, "chain-2")
	if got := e.AttachedContent(t, "chain-2"); !bytes.Equal(got, atSnapshot) {
		t.Error("the clone of a clone does not hold the first source's snapshot")
	}
}

// TestAFailedCloneSaysWhyAndIsRetried: a clone whose source snapshot does
// not exist (a Volume made with kubectl, which the API would refuse)
// fails visibly: cloneStatus failed, its Clone condition naming the
// snapshot; attached meanwhile, it does not attach, as it holds nothing
// yet. Once the snapshot exists, the retried clone completes and the
// volume attaches with the snapshot's bytes.
func TestAFailedCloneSaysWhyAndIsRetried(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	endpoint := e.WaitVolume(t, "src", "src attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x77 1M 2M", "flush")

	e.Call(t, "POST", "/v1/volumes", `{"name":"clone","size":"8Mi","numberOfReplicas":1,"dataSource":"snap://src/later"}`).Expect(t, 404, `volume \"src\" has no snapshot \"later\"`)
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "clone"}, Spec: longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, DataSource: "snap://src/later"}}
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitVolume(t, "clone", "the clone failed, saying why", func(v map[string]any) bool {
		cs, _ := v["cloneStatus"].(map[string]any)
		cond, _ := v["conditions"].(map[string]any)["Clone"].(map[string]any)
		return cs["state"] == "failed" && cond["reason"] == "CloneFailed" && strings.Contains(fmt.Sprint(cond["message"]), "volume src has no snapshot later")
	})
	e.Call(t, "POST", "/v1/volumes/clone?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	if v := e.Call(t, "GET", "/v1/volumes/clone", "").Body; v["state"] == "attached" {
		t.Fatal("a volume whose clone failed attached")
	}

	// A volume cannot be its own source.
	self := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "self"}, Spec: longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, DataSource: "vol://self"}}
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), self, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.WaitVolume(t, "self", "a volume that is its own source fails, saying so", func(v map[string]any) bool {
		cond, _ := v["conditions"].(map[string]any)["Clone"].(map[string]any)
		return cond["reason"] == "CloneFailed" && strings.Contains(fmt.Sprint(cond["message"]), "a volume cannot be its own source")
	})
	// A failed clone is deleted as any volume, its data with it.
	e.Call(t, "DELETE", "/v1/volumes/self", "").Expect(t, 204)
	framework.Eventually(t, 30*time.Second, "the failed clone deleted", func() (bool, error) {
		return e.Call(t, "GET", "/v1/volumes/self", "").Status == 404, nil
	})

	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"later"}`).Expect(t, 200)
	framework.QemuIO(t, endpoint, "write -P 0x88 1M 1M", "flush")
	v2 := e.WaitVolume(t, "clone", "the retried clone completed and the volume attached", func(v map[string]any) bool {
		cs, _ := v["cloneStatus"].(map[string]any)
		return cs["state"] == "completed" && v["state"] == "attached" && v["endpoint"] != ""
	})
	want := make([]byte, 8<<20)
	framework.Fill(want, 0x77, 1<<20, 2<<20)
	if got := framework.DeviceContent(t, v2["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Error("the retried clone does not hold the snapshot's bytes")
	}
}

// TestACloneIsMadeOnItsSourcesNode: with two managers, a clone asked of
// either is made by the manager of the node that holds its source's
// replicas, its own replicas there, where it reads the source's engine;
// it then attaches there with the source's bytes.
func TestACloneIsMadeOnItsSourcesNode(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()

	// Only node-2 runs while the source is made: its replicas are there.
	d2 := framework.StartDaemon(t, cfg, ns, "node-2", t.TempDir())
	e2 := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: lh}, Base: "http://" + d2.APIAddress}
	e2.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e2.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-2"}`).Expect(t, 200)
	endpoint := e2.WaitVolume(t, "src", "src attached on node-2", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x2d 2M 2M", "flush")
	e2.Call(t, "POST", "/v1/volumes/src?action=detach", "").Expect(t, 200)
	e2.WaitVolume(t, "src", "src detached", func(v map[string]any) bool { return v["state"] == "detached" })

	d1 := framework.StartDaemon(t, cfg, ns, "node-1", t.TempDir())
	e1 := &framework.APIEnv{ManagerEnv: e2.ManagerEnv, Base: "http://" + d1.APIAddress}
	framework.Eventually(t, 20*time.Second, "node-1's API reads src", func() (bool, error) { return e1.Call(t, "GET", "/v1/volumes/src", "").Status == 200, nil })
	e1.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).Expect(t, 200)
	e1.WaitCloned(t, "copy")
	list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{LabelSelector: "longhornvolume=copy"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Spec.NodeID != "node-2" {
		t.Fatalf("the clone's replicas: %+v, %v; want one on node-2", list, err)
	}
	e1.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-2"}`).Expect(t, 200)
	v := e1.WaitVolume(t, "copy", "copy attached on node-2", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	want := make([]byte, 8<<20)
	framework.Fill(want, 0x2d, 2<<20, 2<<20)
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Error("the clone made on its source's node does not hold the source's bytes")
	}
}
