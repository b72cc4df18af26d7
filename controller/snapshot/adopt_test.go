package snapshot

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// purgedSnapshotEnv is a volume owned by node-1 whose running engine
// purged snapshot "gone", while the Engine object in the cache still lists
// it, not removed: the mirror taken before the purge.
func purgedSnapshotEnv(t *testing.T, objects ...*longhorn.Snapshot) (*Controller, *lhfake.Clientset, cache.Indexer) {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	instances, dir := testEngines(t, log)
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("gone", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("newer", nil); err != nil {
		t.Fatal(err)
	}
	if err := run.Engine.DeleteSnapshot("gone"); err != nil {
		t.Fatal(err)
	}
	run.Engine.StartPurge()
	deadline := time.Now().Add(10 * time.Second)
	for !run.Engine.WasPurged("gone") {
		if time.Now().After(deadline) {
			t.Fatal("the engine did not purge the snapshot")
		}
		time.Sleep(10 * time.Millisecond)
	}

	lh := lhfake.NewSimpleClientset()
	for _, s := range objects {
		if _, err := lh.LonghornV1beta2().Snapshots("ns").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns"}, Status: longhorn.VolumeStatus{OwnerID: "node-1"}}
	e := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: datastore.EngineName("vol"), Namespace: "ns"},
		Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}},
		Status: longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: longhorn.InstanceStateRunning},
			Snapshots: map[string]*longhorn.SnapshotInfo{"gone": {Name: "gone", Created: "2026-11-23T01:00:00Z"}}}}
	for _, add := range []error{lhi.Volumes().Informer().GetIndexer().Add(v), lhi.Engines().Informer().GetIndexer().Add(e)} {
		if add != nil {
			t.Fatal(add)
		}
	}
	for _, s := range objects {
		if err := lhi.Snapshots().Informer().GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	sc := &Controller{ds: datastore.New("ns", lh, kube, inf), nodeID: "node-1", instances: instance.Local(instances)}
	sc.Base = kit.NewBase("test", logrus.NewEntry(log), nil, nil)
	t.Cleanup(sc.Queue.ShutDown)
	return sc, lh, lhi.Engines().Informer().GetIndexer()
}

// A snapshot the engine purged is not given an object again from a stale
// mirror of the engine: its deleted object would come back, and a
// `kubectl delete` would seem undone.
func TestAPurgedSnapshotIsNotAdoptedFromAStaleMirror(t *testing.T) {
	sc, lh, _ := purgedSnapshotEnv(t)
	if _, err := sc.sync(context.Background(), "ns/gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := lh.LonghornV1beta2().Snapshots("ns").Get(context.Background(), "gone", metav1.GetOptions{}); err == nil {
		t.Fatal("the purged snapshot was given an object again")
	}
}

// An object adopted from the engine whose snapshot is purged before the
// object's status was first written goes too, as one with a status does.
func TestAnAdoptedObjectWithoutStatusGoesWhenItsSnapshotIsPurged(t *testing.T) {
	adopted := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns",
		Labels: map[string]string{"longhornvolume": "vol"}, Finalizers: []string{"longhorn.io"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "longhorn.io/v1beta2", Kind: "Volume", Name: "vol", UID: "u"}}},
		Spec: longhorn.SnapshotSpec{Volume: "vol"}}
	sc, lh, engines := purgedSnapshotEnv(t, adopted)
	// The mirror now shows the purge.
	e, _ := sc.ds.GetEngineRO(datastore.EngineName("vol"))
	fresh := e.DeepCopy()
	delete(fresh.Status.Snapshots, "gone")
	if err := engines.Update(fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.sync(context.Background(), "ns/gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := lh.LonghornV1beta2().Snapshots("ns").Get(context.Background(), "gone", metav1.GetOptions{}); err == nil {
		t.Fatal("the object of the purged snapshot is still there")
	}
}
