package app

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fill writes b at off in want, as qemu-io's "write -P b off len" does.
func fill(want []byte, b byte, off, n int) {
	for i := off; i < off+n; i++ {
		want[i] = b
	}
}

// waitSnapshotReady waits until the Snapshot object of a snapshot taken
// through the API is ready to use, as a clone of it asks.
func (e *apiEnv) waitSnapshotReady(t *testing.T, name string) {
	t.Helper()
	eventually(t, 30*time.Second, "snapshot "+name+" ready to use", func() (bool, error) {
		s, err := e.lh.LonghornV1beta2().Snapshots(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && s.Status.ReadyToUse, nil
	})
}

// waitCloned waits until the volume's clone completed, and shows its
// status if it does not.
func (e *apiEnv) waitCloned(t *testing.T, name string) map[string]any {
	t.Helper()
	var last map[string]any
	done := false
	defer func() {
		if !done {
			t.Logf("volume %s: state %v, cloneStatus %v, conditions %v", name, last["state"], last["cloneStatus"], last["conditions"])
		}
	}()
	eventually(t, 60*time.Second, "volume "+name+" cloned", func() (bool, error) {
		r := e.call(t, "GET", "/v1/volumes/"+name, "")
		last = r.body
		cs, _ := r.body["cloneStatus"].(map[string]any)
		return r.status == 200 && cs["state"] == "completed" && r.body["state"] == "detached", nil
	})
	done = true
	return last
}

// attachedContent attaches the volume on node-1 and reads it whole
// through its NBD endpoint.
func (e *apiEnv) attachedContent(t *testing.T, name string) []byte {
	t.Helper()
	return deviceContent(t, e.attachedContentEndpoint(t, name))
}

// TestAVolumeClonedFromASnapshotOrAVolumeHoldsItsBytes: a volume created
// with Longhorn's dataSource holds the bytes of its source: snap:// the
// snapshot's (the source written since keeps its new bytes, the clone has
// the snapshot's), vol:// the source's as it is, from a snapshot the
// clone takes, whether the source is attached or detached (its engine
// then runs for the clone only, and stops after). A clone larger than its
// source reads zeros past it. The source is never written.
func TestAVolumeClonedFromASnapshotOrAVolumeHoldsItsBytes(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	const size = 16 << 20
	e.call(t, "POST", "/v1/volumes", `{"name":"src","size":"16Mi","numberOfReplicas":2}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	endpoint := e.waitVolume(t, "src", "src attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	qemuIO(t, endpoint, "write -P 0xab 0 1M", "write -P 0x11 10M 3M", "write -P 0x5a 16773120 4096", "flush")
	atSnapshot := make([]byte, size)
	fill(atSnapshot, 0xab, 0, 1<<20)
	fill(atSnapshot, 0x11, 10<<20, 3<<20)
	fill(atSnapshot, 0x5a, size-4096, 4096)
	e.call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).expect(t, 200)
	qemuIO(t, endpoint, "write -P 0xcd 0 2M", "flush")
	now := bytes.Clone(atSnapshot)
	fill(now, 0xcd, 0, 2<<20)
	e.waitSnapshotReady(t, "s1")

	e.call(t, "POST", "/v1/volumes", `{"name":"from-snap","size":"16Mi","numberOfReplicas":2,"dataSource":"snap://src/s1"}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes", `{"name":"from-vol","size":"20Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).expect(t, 200)
	for _, name := range []string{"from-snap", "from-vol"} {
		v := e.waitCloned(t, name)
		cs := v["cloneStatus"].(map[string]any)
		if cs["sourceVolume"] != "src" || cs["snapshot"] == "" {
			t.Errorf("%s: cloneStatus %v", name, cs)
		}
	}
	if got := e.attachedContent(t, "from-snap"); !bytes.Equal(got, atSnapshot) {
		t.Error("the clone of snapshot s1 does not hold the snapshot's bytes")
	}
	if got := e.attachedContent(t, "from-vol"); !bytes.Equal(got[:size], now) || !bytes.Equal(got[size:], make([]byte, 4<<20)) {
		t.Error("the clone of volume src does not hold its bytes, then zeros")
	}
	if got := deviceContent(t, endpoint); !bytes.Equal(got, now) {
		t.Error("the clones changed their source")
	}
	// The vol:// clone's snapshot of the source is there, labelled for it.
	cs := e.call(t, "GET", "/v1/volumes/from-vol", "").body["cloneStatus"].(map[string]any)
	snap := e.call(t, "POST", "/v1/volumes/src?action=snapshotGet", fmt.Sprintf(`{"name":%q}`, cs["snapshot"])).expect(t, 200)
	if snap.body["labels"].(map[string]any)["longhorn.io/for-cloning-volume"] != "from-vol" {
		t.Errorf("the snapshot a vol:// clone took: %s", snap.raw)
	}

	// A detached source: its engine runs for the clone, then stops.
	e.call(t, "POST", "/v1/volumes/src?action=detach", "").expect(t, 200)
	e.waitVolume(t, "src", "src detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes", `{"name":"from-detached","size":"16Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).expect(t, 200)
	e.waitCloned(t, "from-detached")
	e.waitVolume(t, "src", "src detached again after the clone", func(v map[string]any) bool { return v["state"] == "detached" && v["endpoint"] == "" })
	if got := e.attachedContent(t, "from-detached"); !bytes.Equal(got, now) {
		t.Error("the clone of detached volume src does not hold its bytes")
	}
	if got := e.attachedContent(t, "src"); !bytes.Equal(got, now) {
		t.Error("a clone changed its detached source")
	}

	// A clone of a clone made at once waits until its source is complete.
	e.call(t, "POST", "/v1/volumes", `{"name":"chain-1","size":"16Mi","numberOfReplicas":1,"dataSource":"snap://src/s1"}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes", `{"name":"chain-2","size":"16Mi","numberOfReplicas":1,"dataSource":"vol://chain-1"}`).expect(t, 200)
	e.waitCloned(t, "chain-2")
	if got := e.attachedContent(t, "chain-2"); !bytes.Equal(got, atSnapshot) {
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
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	endpoint := e.waitVolume(t, "src", "src attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	qemuIO(t, endpoint, "write -P 0x77 1M 2M", "flush")

	e.call(t, "POST", "/v1/volumes", `{"name":"clone","size":"8Mi","numberOfReplicas":1,"dataSource":"snap://src/later"}`).expect(t, 404, `volume \"src\" has no snapshot \"later\"`)
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "clone"}, Spec: longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, DataSource: "snap://src/later"}}
	if _, err := e.lh.LonghornV1beta2().Volumes(e.ns).Create(context.Background(), v, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVolume(t, "clone", "the clone failed, saying why", func(v map[string]any) bool {
		cs, _ := v["cloneStatus"].(map[string]any)
		cond, _ := v["conditions"].(map[string]any)["Clone"].(map[string]any)
		return cs["state"] == "failed" && cond["reason"] == "CloneFailed" && strings.Contains(fmt.Sprint(cond["message"]), "volume src has no snapshot later")
	})
	e.call(t, "POST", "/v1/volumes/clone?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	if v := e.call(t, "GET", "/v1/volumes/clone", "").body; v["state"] == "attached" {
		t.Fatal("a volume whose clone failed attached")
	}

	// A volume cannot be its own source.
	self := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "self"}, Spec: longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, DataSource: "vol://self"}}
	if _, err := e.lh.LonghornV1beta2().Volumes(e.ns).Create(context.Background(), self, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVolume(t, "self", "a volume that is its own source fails, saying so", func(v map[string]any) bool {
		cond, _ := v["conditions"].(map[string]any)["Clone"].(map[string]any)
		return cond["reason"] == "CloneFailed" && strings.Contains(fmt.Sprint(cond["message"]), "a volume cannot be its own source")
	})
	// A failed clone is deleted as any volume, its data with it.
	e.call(t, "DELETE", "/v1/volumes/self", "").expect(t, 204)
	eventually(t, 30*time.Second, "the failed clone deleted", func() (bool, error) {
		return e.call(t, "GET", "/v1/volumes/self", "").status == 404, nil
	})

	e.call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"later"}`).expect(t, 200)
	qemuIO(t, endpoint, "write -P 0x88 1M 1M", "flush")
	v2 := e.waitVolume(t, "clone", "the retried clone completed and the volume attached", func(v map[string]any) bool {
		cs, _ := v["cloneStatus"].(map[string]any)
		return cs["state"] == "completed" && v["state"] == "attached" && v["endpoint"] != ""
	})
	want := make([]byte, 8<<20)
	fill(want, 0x77, 1<<20, 2<<20)
	if got := deviceContent(t, v2["endpoint"].(string)); !bytes.Equal(got, want) {
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
	installRBAC(t, kube, ns)
	cfg := cluster.ServiceAccountConfig(ns, serviceAccount)
	lh := lhClient(t, cluster.Config)
	ctx := context.Background()

	// Only node-2 runs while the source is made: its replicas are there.
	d2 := startDaemon(t, cfg, ns, "node-2", t.TempDir())
	e2 := &apiEnv{managerEnv: &managerEnv{cluster: cluster, ns: ns, kube: kube, lh: lh}, base: "http://" + d2.apiAddress}
	e2.call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).expect(t, 200)
	e2.call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-2"}`).expect(t, 200)
	endpoint := e2.waitVolume(t, "src", "src attached on node-2", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
	qemuIO(t, endpoint, "write -P 0x2d 2M 2M", "flush")
	e2.call(t, "POST", "/v1/volumes/src?action=detach", "").expect(t, 200)
	e2.waitVolume(t, "src", "src detached", func(v map[string]any) bool { return v["state"] == "detached" })

	d1 := startDaemon(t, cfg, ns, "node-1", t.TempDir())
	e1 := &apiEnv{managerEnv: e2.managerEnv, base: "http://" + d1.apiAddress}
	eventually(t, 20*time.Second, "node-1's API reads src", func() (bool, error) { return e1.call(t, "GET", "/v1/volumes/src", "").status == 200, nil })
	e1.call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"dataSource":"vol://src"}`).expect(t, 200)
	e1.waitCloned(t, "copy")
	list, err := lh.LonghornV1beta2().Replicas(ns).List(ctx, metav1.ListOptions{LabelSelector: "longhornvolume=copy"})
	if err != nil || len(list.Items) != 1 || list.Items[0].Spec.NodeID != "node-2" {
		t.Fatalf("the clone's replicas: %+v, %v; want one on node-2", list, err)
	}
	e1.call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-2"}`).expect(t, 200)
	v := e1.waitVolume(t, "copy", "copy attached on node-2", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	want := make([]byte, 8<<20)
	fill(want, 0x2d, 2<<20, 2<<20)
	if got := deviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Error("the clone made on its source's node does not hold the source's bytes")
	}
}
