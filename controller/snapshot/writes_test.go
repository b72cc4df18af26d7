package snapshot

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// A Snapshot object a user creates costs, of its own, two writes (its
// volume label, finalizer and owner; then its status) and two engine calls
// (the create, and one read of the engine after it): the first sync takes
// the engine snapshot right after the metadata write; the engine's change
// brings the object back for its status, written from the engine's entry
// in the volume's next round (statusPace), without waiting for the Engine
// status mirror; another sync writes nothing and reads nothing, the engine
// not having changed. The Engine status mirror (one write, the read being
// shared) and the parent's new child are the volume controller's and the
// parent's.
func TestOneSnapshotCostsTwoWritesAndTwoEngineCalls(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	var mu sync.Mutex
	var calls []string
	dir := t.TempDir() // made first: its removal runs after the engines stop
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, func(call string) { mu.Lock(); calls = append(calls, call); mu.Unlock() })
	t.Cleanup(instances.StopAll)
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	engineCalls := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }
	// The Engine status mirror at the engine's start read it.
	run.Engine.Status()
	mu.Lock()
	calls = nil
	mu.Unlock()

	ctx := context.Background()
	lh := lhfake.NewSimpleClientset()
	// The apiserver gives every write a new resource version; the fake
	// does not.
	var version atomic.Int64
	lh.PrependReactor("*", "snapshots", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if a, ok := action.(k8stesting.CreateAction); ok {
			a.GetObject().(metav1.Object).SetResourceVersion(strconv.FormatInt(version.Add(1), 10))
		}
		if a, ok := action.(k8stesting.UpdateAction); ok {
			a.GetObject().(metav1.Object).SetResourceVersion(strconv.FormatInt(version.Add(1), 10))
		}
		return false, nil, nil
	})
	created, err := lh.LonghornV1beta2().Snapshots("ns").Create(ctx, &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns"},
		Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true, Labels: map[string]string{"k": "v"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", UID: "vol-uid"},
		Spec: longhorn.VolumeSpec{Size: 4 << 20}, Status: longhorn.VolumeStatus{OwnerID: "node-1"}}
	e := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: datastore.EngineName("vol"), Namespace: "ns"},
		Spec:   longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}},
		Status: longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: longhorn.InstanceStateRunning}}}
	for _, add := range []error{lhi.Volumes().Informer().GetIndexer().Add(v), lhi.Engines().Informer().GetIndexer().Add(e),
		lhi.Snapshots().Informer().GetIndexer().Add(created)} {
		if add != nil {
			t.Fatal(add)
		}
	}
	sc := &Controller{ds: datastore.New("ns", lh, kube, inf), nodeID: "node-1", instances: instance.Local(instances)}
	sc.Base = kit.NewBase("test", logrus.NewEntry(log), nil, nil)
	t.Cleanup(sc.Queue.ShutDown)

	// writes returns the writes to the API since the last call, as
	// "verb" or "verb status".
	seen := len(lh.Actions())
	writes := func() []string {
		var out []string
		for _, a := range lh.Actions()[seen:] {
			if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
				continue
			}
			w := a.GetVerb()
			if a.GetSubresource() != "" {
				w += " " + a.GetSubresource()
			}
			out = append(out, w)
		}
		seen = len(lh.Actions())
		return out
	}
	// syncFromAPI brings the object back into the cache, as the informer
	// would, and syncs it.
	syncFromAPI := func() {
		t.Helper()
		cur, err := lh.LonghornV1beta2().Snapshots("ns").Get(ctx, "s1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := lhi.Snapshots().Informer().GetIndexer().Update(cur); err != nil {
			t.Fatal(err)
		}
		_ = writes() // the Get above
		if _, err := sc.sync(ctx, "ns/s1"); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := sc.sync(ctx, "ns/s1"); err != nil {
		t.Fatal(err)
	}
	if got := writes(); !slices.Equal(got, []string{"update"}) {
		t.Fatalf("the first sync wrote %v, want one update (label, finalizer, owner)", got)
	}
	if got := engineCalls(); !slices.Equal(got, []string{"CreateSnapshot"}) {
		t.Fatalf("the first sync made the engine calls %v, want the create", got)
	}
	// The engine tells its listeners of the snapshot (as instance.Engines
	// does); the object comes back after the gathering window.
	sc.localEngineChanged("vol")
	if got := engineCalls(); !slices.Equal(got, []string{"CreateSnapshot", "Status"}) {
		t.Fatalf("the engine's change made the engine calls %v, want the create and one read", got)
	}
	if n := sc.Queue.Len(); n != 0 {
		t.Fatalf("the engine's change queued %d keys at once, want them after the gathering window", n)
	}
	waitQueued(t, sc, "ns/s1")
	syncFromAPI()
	if got := writes(); !slices.Equal(got, []string{"update status"}) {
		t.Fatalf("the sync the engine's change asked for wrote %v, want the status", got)
	}
	if got := engineCalls(); !slices.Equal(got, []string{"CreateSnapshot", "Status"}) {
		t.Fatalf("the status write read the engine again: %v", got)
	}
	// The Engine object's status never showed the snapshot (its mirror is
	// the volume controller's, paced): the object did not wait for it.
	if cached, _, _ := lhi.Engines().Informer().GetIndexer().GetByKey("ns/" + e.Name); len(cached.(*longhorn.Engine).Status.Snapshots) != 0 {
		t.Fatal("the test's Engine status lists snapshots")
	}
	mu.Lock()
	calls = nil
	mu.Unlock()

	// A sync before the informer brings the write back (an engine change
	// queued the key) acts on nothing older than its own write: a write
	// from that copy would be refused with a conflict.
	if _, err := sc.sync(ctx, "ns/s1"); err != nil {
		t.Fatal(err)
	}
	if got := writes(); len(got) != 0 {
		t.Fatalf("a sync of the copy from before the controller's own write wrote %v", got)
	}

	syncFromAPI()
	if got := writes(); len(got) != 0 {
		t.Fatalf("a sync of an object in sync wrote %v", got)
	}
	if got := engineCalls(); len(got) != 0 {
		t.Fatalf("a sync with no change of the engine made the engine calls %v", got)
	}
	// The volume controller's mirror reads the engine at the same
	// generation: that read is the one already made.
	run.Engine.Status()
	if got := engineCalls(); len(got) != 0 {
		t.Fatalf("the mirror's read after the sync called the engine: %v", got)
	}
	s, _ := lh.LonghornV1beta2().Snapshots("ns").Get(ctx, "s1", metav1.GetOptions{})
	if !s.Status.ReadyToUse || s.Status.CreationTime == "" || !s.Status.Children["volume-head"] || s.Status.Labels["k"] != "v" {
		t.Fatalf("status %+v, want the engine's entry, ready to use", s.Status)
	}
}
