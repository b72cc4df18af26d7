package snapshot

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// A Snapshot object a user creates costs, of its own, two writes (its
// volume label, finalizer and owner; then its status) and one engine call
// (the create): the first sync takes the engine snapshot right after the
// metadata write, a sync before the Engine status shows the snapshot does
// nothing, the one after writes the status; another writes nothing. The Engine status
// mirror (one Status call, one write) and the parent's new child are the
// volume controller's and the parent's.
func TestOneSnapshotCostsTwoWritesAndOneEngineCall(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	var mu sync.Mutex
	var calls []string
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, func(call string) { mu.Lock(); calls = append(calls, call); mu.Unlock() })
	t.Cleanup(instances.StopAll)
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(t.TempDir(), "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	engineCalls := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(calls) }

	ctx := context.Background()
	lh := lhfake.NewSimpleClientset()
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
	sc := &Controller{ds: datastore.New("ns", lh, kube, inf), nodeID: "node-1", instances: instances}
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
		t.Fatalf("the first sync made the engine calls %v, want the create alone", got)
	}

	// The Engine status lags (the mirror is paced): a sync before it
	// neither writes nor asks the engine again.
	syncFromAPI()
	if got := writes(); len(got) != 0 {
		t.Fatalf("a sync before the mirror wrote %v", got)
	}
	if got := engineCalls(); !slices.Equal(got, []string{"CreateSnapshot"}) {
		t.Fatalf("a sync before the mirror called the engine again: %v", got)
	}

	// The volume controller's mirror of the engine.
	st := run.Engine.Status()
	mirrored := e.DeepCopy()
	mirrored.Status.Snapshots = map[string]*longhorn.SnapshotInfo{}
	for _, s := range st.Snapshots {
		children := map[string]bool{}
		for _, c := range s.Children {
			children[c] = true
		}
		mirrored.Status.Snapshots[s.Name] = &longhorn.SnapshotInfo{Name: s.Name, Parent: s.Parent, Children: children,
			UserCreated: s.UserCreated, Created: s.Created, Size: strconv.FormatInt(s.Size, 10), Labels: s.Labels}
	}
	if err := lhi.Engines().Informer().GetIndexer().Update(mirrored); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	calls = nil
	mu.Unlock()

	syncFromAPI()
	if got := writes(); !slices.Equal(got, []string{"update status"}) {
		t.Fatalf("the sync after the mirror wrote %v, want one status update", got)
	}
	syncFromAPI()
	if got := writes(); len(got) != 0 {
		t.Fatalf("a sync of an object in sync wrote %v", got)
	}
	if got := engineCalls(); len(got) != 0 {
		t.Fatalf("the syncs after the create made the engine calls %v", got)
	}
	s, _ := lh.LonghornV1beta2().Snapshots("ns").Get(ctx, "s1", metav1.GetOptions{})
	if !s.Status.ReadyToUse || s.Status.CreationTime == "" || !s.Status.Children["volume-head"] || s.Status.Labels["k"] != "v" {
		t.Fatalf("status %+v, want the engine's entry, ready to use", s.Status)
	}
}
