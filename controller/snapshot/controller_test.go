package snapshot

import (
	"context"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	lhinformers "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/informers/externalversions/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// An Engine change enqueues only the snapshots it concerns: every one of
// the volume on a start or stop, the deleting ones when a purge's status
// moves, otherwise those whose entries changed.
func TestEngineChangesEnqueueOnlyTheSnapshotsTheyConcern(t *testing.T) {
	lh := lhfake.NewSimpleClientset()
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	now := metav1.Now()
	for _, s := range []*longhorn.Snapshot{
		{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "ns", Labels: map[string]string{"longhornvolume": "vol"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "deleting", Namespace: "ns", Labels: map[string]string{"longhornvolume": "vol"}, DeletionTimestamp: &now}},
		{ObjectMeta: metav1.ObjectMeta{Name: "changed", Namespace: "ns", Labels: map[string]string{"longhornvolume": "vol"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-volume", Namespace: "ns", Labels: map[string]string{"longhornvolume": "other"}, DeletionTimestamp: &now}},
	} {
		if err := inf.Longhorn.Longhorn().V1beta2().Snapshots().Informer().GetIndexer().Add(s); err != nil {
			t.Fatal(err)
		}
	}
	ds := datastore.New("ns", lh, kube, inf)
	engine := func(state longhorn.InstanceState, purge string, changedSize string) *longhorn.Engine {
		return &longhorn.Engine{Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}}, Status: longhorn.EngineStatus{
			InstanceStatus: longhorn.InstanceStatus{CurrentState: state},
			PurgeStatus:    map[string]*longhorn.PurgeStatus{"addr": {State: purge}},
			Snapshots: map[string]*longhorn.SnapshotInfo{
				"kept": {Name: "kept", Size: "1"}, "changed": {Name: "changed", Size: changedSize}, "volume-head": {Name: "volume-head", Size: changedSize},
			}}}
	}
	running := longhorn.InstanceStateRunning
	for _, c := range []struct {
		name     string
		old, cur *longhorn.Engine
		want     []string
	}{
		{"a new engine: all of the volume", nil, engine(running, "", "1"), []string{"changed", "deleting", "kept"}},
		{"started or stopped: all of the volume", engine(longhorn.InstanceStateStopped, "", "1"), engine(running, "", "1"), []string{"changed", "deleting", "kept"}},
		{"a purge ended: the deleting ones", engine(running, "in_progress", "1"), engine(running, "complete", "1"), []string{"deleting"}},
		{"an entry changed: that one (never the head)", engine(running, "", "1"), engine(running, "", "2"), []string{"changed"}},
		{"nothing changed: none", engine(running, "", "1"), engine(running, "", "1"), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &Controller{ds: ds}
			sc.Base = kit.NewBase("test", logrus.NewEntry(logrus.New()), nil, nil)
			defer sc.Queue.ShutDown()
			if c.old == nil {
				sc.engineChanged(nil, c.cur)
			} else {
				sc.engineChanged(c.old, c.cur)
			}
			var got []string
			for sc.Queue.Len() > 0 {
				key, _ := sc.Queue.Get()
				got = append(got, key[len("ns/"):])
				sc.Queue.Done(key)
			}
			sort.Strings(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("enqueued %v, want %v", got, c.want)
			}
		})
	}
}

// TestNeedsMutation: a snapshot the admission policy labelled and
// finalized is not written again for the owner reference alone.
func TestNeedsMutation(t *testing.T) {
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", UID: "u"}}
	now := metav1.Now()
	for _, c := range []struct {
		name string
		snap *longhorn.Snapshot
		want bool
	}{
		{"labelled and finalized, no owner", &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}}}, false},
		{"as created without the policy", &longhorn.Snapshot{}, true},
		{"a wrong volume label", &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{types.LabelVolume: "other"}, Finalizers: []string{types.LonghornFinalizer}}}, true},
		{"no finalizer", &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{types.LabelVolume: "vol"}}}, true},
		{"being deleted without the finalizer", &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{
			Labels: map[string]string{types.LabelVolume: "vol"}, DeletionTimestamp: &now}}, false},
	} {
		if got := needsMutation(c.snap, v); got != c.want {
			t.Errorf("%s: needsMutation %v, want %v", c.name, got, c.want)
		}
	}
}

// A Snapshot object whose engine is not started on this node is synced
// again when it starts. After a manager's restart the volume's Engine
// still says running from before, so no change of the Engine's state
// brings back the objects created while no manager ran (or whose deletion
// waits for the engine): the start itself must.
func TestAnEngineStartBringsBackItsVolumesSnapshots(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	dir := t.TempDir() // made first: its removal runs after the engines stop
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	lh := lhfake.NewSimpleClientset()
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	snap := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "made-while-down", Namespace: "ns",
		Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}},
		Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true}}
	other := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "of-another-volume", Namespace: "ns",
		Labels: map[string]string{types.LabelVolume: "vol2"}, Finalizers: []string{types.LonghornFinalizer}},
		Spec: longhorn.SnapshotSpec{Volume: "vol2", CreateSnapshot: true}}
	for _, add := range []error{
		lhi.Volumes().Informer().GetIndexer().Add(&longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns"},
			Spec: longhorn.VolumeSpec{Size: 4 << 20}, Status: longhorn.VolumeStatus{OwnerID: "node-1"}}),
		lhi.Engines().Informer().GetIndexer().Add(&longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: datastore.EngineName("vol"), Namespace: "ns"},
			Spec:   longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}},
			Status: longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: longhorn.InstanceStateRunning}}}),
		lhi.Snapshots().Informer().GetIndexer().Add(snap),
		lhi.Snapshots().Informer().GetIndexer().Add(other),
	} {
		if add != nil {
			t.Fatal(add)
		}
	}
	c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", instance.Local(instances))
	t.Cleanup(c.Queue.ShutDown)

	// The engine is not started yet: the sync can do nothing.
	if _, err := c.sync(context.Background(), "ns/made-while-down"); err != nil {
		t.Fatal(err)
	}
	if n := c.Queue.Len(); n != 0 {
		t.Fatalf("%d keys queued before the engine started", n)
	}
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Queue.Len(); n != 1 {
		t.Fatalf("the engine's start queued %d keys, want its volume's one snapshot", n)
	}
	key, _ := c.Queue.Get()
	if key != "ns/made-while-down" {
		t.Fatalf("the engine's start queued %v", key)
	}
	c.Queue.Done(key)
	if _, err := c.sync(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	taken, err := run.Engine.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(taken, func(s replica.Snapshot) bool { return s.Name == "made-while-down" }) {
		t.Fatalf("the sync after the start did not take the snapshot: the engine has %v", taken)
	}
	// The snapshot is a change of the engine, which brings its object
	// back (the cache still holds it without a status).
	waitQueued(t, c, "ns/made-while-down")
	// Starting an engine that runs is no start.
	if _, err := instances.Start("vol", 4<<20, nil, false); err != nil {
		t.Fatal(err)
	}
	if n := c.Queue.Len(); n != 0 {
		t.Fatalf("a running engine's Start queued %d keys", n)
	}
}

// waitQueued waits until an engine's change queues a key (after its round's
// delay), takes it off the queue and checks it is want.
func waitQueued(t *testing.T, c *Controller, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.Queue.Len() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the engine's change queued nothing")
		}
	}
	key, _ := c.Queue.Get()
	c.Queue.Done(key)
	if key != want {
		t.Fatalf("the engine's change queued %v, want %s", key, want)
	}
}

// A snapshot whose deletion waits for its volume's engine comes back when
// an engine starts, whatever the engine can read yet, and looks again
// after deletionRecheck should no event come (the CSI driver deleted a
// snapshot while the engine of its volume stopped and started again
// between two mirrors of the Engine object, and the deletion waited for
// ever).
func TestADeletionWaitingForItsEngineComesBack(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	instances, dir := testEngines(t, log)
	now := metav1.Now()
	snap := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "going", Namespace: "ns", DeletionTimestamp: &now,
		Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}},
		Spec: longhorn.SnapshotSpec{Volume: "vol"}, Status: longhorn.SnapshotStatus{CreationTime: "2026-11-26T00:00:00Z"}}
	c, _, _ := deletionEnv(t, log, instances, snap)

	res, err := c.sync(context.Background(), "ns/going")
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != deletionRecheck {
		t.Errorf("a deletion waiting for its engine looks again after %v, want %v", res.RequeueAfter, deletionRecheck)
	}
	if _, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false); err != nil {
		t.Fatal(err)
	}
	if n := c.Queue.Len(); n != 1 {
		t.Fatalf("the engine's start queued %d keys, want the snapshot being deleted", n)
	}
	if key, _ := c.Queue.Get(); key != "ns/going" {
		t.Fatalf("the engine's start queued %v", key)
	}
}

// A deletion refused because an export read the snapshot a moment ago
// (a clone of it, say) is no failure: it comes back just as the hold's
// lease ends, at most deletionRecheck later, not after the queue's
// doubling backoff (which let the CSI driver's 90 s wait run out), and
// then goes ahead.
func TestADeletionAnExportHoldsComesBackWhenTheHoldEnds(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	dir := t.TempDir() // made first: its removal runs after the engines stop
	clock := clocktesting.NewFakeClock(time.Now())
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clock, logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	run, err := instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Engine.CreateSnapshot("held", nil); err != nil {
		t.Fatal(err)
	}
	_, release, err := run.Engine.OpenSnapshotForRead("held", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	release() // the export's last read: the hold's lease runs from now

	now := metav1.Now()
	snap := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "ns", DeletionTimestamp: &now,
		Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}},
		Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true}, Status: longhorn.SnapshotStatus{CreationTime: "2026-11-26T00:00:00Z"}}
	c, lh, lhi := deletionEnv(t, log, instances, snap)

	res, err := c.sync(context.Background(), "ns/held")
	if err != nil {
		t.Fatalf("a held snapshot's deletion is no failure, got %v", err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > deletionRecheck {
		t.Errorf("a held deletion looks again after %v, want within (0, %v]", res.RequeueAfter, deletionRecheck)
	}
	got, err := lh.LonghornV1beta2().Snapshots("ns").Get(context.Background(), "held", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got.Status.Error, "the deletion waits") || !strings.Contains(got.Status.Error, "is held until") {
		t.Errorf("status.error %q, want why the deletion waits", got.Status.Error)
	}
	if s, err := run.Engine.Snapshot("held"); err != nil || s.Removed {
		t.Fatalf("the held snapshot was marked removed: %+v, %v", s, err)
	}

	// The lease ends: the next look deletes it in the engine.
	clock.Step(volumeengine.SnapshotHoldLease + time.Second)
	if err := lhi.Snapshots().Informer().GetIndexer().Update(got); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sync(context.Background(), "ns/held"); err != nil {
		t.Fatal(err)
	}
	if s, err := run.Engine.Snapshot("held"); err == nil && !s.Removed {
		t.Errorf("the snapshot is not marked removed once the hold ended: %+v", s)
	}
}

// heldRecheck: just after the lease, within [1 s, deletionRecheck],
// readRecheck while a read is open, deletionRecheck while a backup reads
// (its end is an engine change, which brings the deletion back sooner).
func TestHeldRecheck(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		until   time.Time
		backups []string
		want    time.Duration
	}{
		{time.Time{}, nil, readRecheck},
		{now.Add(10 * time.Second), nil, 10*time.Second + 200*time.Millisecond},
		{now.Add(time.Minute), nil, deletionRecheck},
		{now.Add(-time.Second), nil, time.Second},
		{time.Time{}, []string{"b1"}, deletionRecheck},
		{time.Time{}, []string{"b1", "b2"}, deletionRecheck},
	} {
		if got := heldRecheck(&volumeengine.HeldError{Until: c.until, Backups: c.backups}, now); got != c.want {
			t.Errorf("until %v, backups %v: %v, want %v", c.until, c.backups, got, c.want)
		}
	}
}

// deletionEnv is a snapshot controller of node-1 over fake clientsets
// holding volume "vol" (owned by node-1) and snap, in its informers' caches
// and the clientset.
func deletionEnv(t *testing.T, log *logrus.Logger, instances *instance.Engines, snap *longhorn.Snapshot) (*Controller, *lhfake.Clientset, lhinformers.Interface) {
	t.Helper()
	return snapshotEnv(t, log, instances, tableVolume("node-1"), snap)
}
