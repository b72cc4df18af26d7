package volume

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// syncNow is the fake clock of the sync table.
var syncNow = time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)

// syncNode is a Node, ready when ready, with one ready disk at path
// (none when path is "").
func syncNode(name string, ready bool, path string) *longhorn.Node {
	status := longhorn.ConditionStatusFalse
	if ready {
		status = longhorn.ConditionStatusTrue
	}
	n := &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: longhorn.NodeSpec{AllowScheduling: true},
		Status: longhorn.NodeStatus{Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: status}}}}
	if path != "" {
		n.Spec.Disks = map[string]longhorn.DiskSpec{"disk-1": {Path: path, AllowScheduling: true}}
		n.Status.DiskStatus = map[string]*longhorn.DiskStatus{"disk-1": {DiskUUID: "disk-uuid-1", StorageMaximum: 100 << 30, StorageAvailable: 80 << 30,
			Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}}
	}
	return n
}

// syncVolume is "vol", 4 MiB, one replica, as the controller leaves a
// new one before making its objects: owned by node-1, its finalizer and
// the default recurring job group.
func syncVolume(mutate ...func(*longhorn.Volume)) *longhorn.Volume {
	v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", UID: "0123456789-uid",
		Finalizers: []string{types.LonghornFinalizer},
		Labels:     map[string]string{types.RecurringJobGroupLabelKey(types.RecurringJobGroupDefault): "enabled"}},
		Spec:   longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1},
		Status: longhorn.VolumeStatus{OwnerID: "node-1"}}
	for _, m := range mutate {
		m(v)
	}
	return v
}

// syncEnv is the volume controller of node-1 over fake clientsets, with
// real engines, its caches filled from the clientset by load.
type syncEnv struct {
	c         *Controller
	lh        *lhfake.Clientset
	inf       datastore.Informers
	instances *instance.Engines
}

func newSyncEnv(t *testing.T, objects ...runtime.Object) *syncEnv {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(syncNow),
		logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	lh := lhfake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", instance.Local(instances), "127.0.0.1:9501",
		clocktesting.NewFakeClock(syncNow), nil)
	t.Cleanup(c.Queue.ShutDown)
	env := &syncEnv{c: c, lh: lh, inf: inf, instances: instances}
	env.load(t)
	return env
}

// load puts the clientset's objects in the caches, as the informers would.
func (env *syncEnv) load(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	lhc := env.lh.LonghornV1beta2()
	lhi := env.inf.Longhorn.Longhorn().V1beta2()
	volumes, err := lhc.Volumes("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas, err := lhc.Replicas("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	engines, err := lhc.Engines("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := lhc.Nodes("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snapshots, err := lhc.Snapshots("ns").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range []struct {
		indexer interface{ Replace([]any, string) error }
		items   []any
	}{
		{lhi.Volumes().Informer().GetIndexer(), anys(volumes.Items)},
		{lhi.Replicas().Informer().GetIndexer(), anys(replicas.Items)},
		{lhi.Engines().Informer().GetIndexer(), anys(engines.Items)},
		{lhi.Nodes().Informer().GetIndexer(), anys(nodes.Items)},
		{lhi.Snapshots().Informer().GetIndexer(), anys(snapshots.Items)},
	} {
		if err := set.indexer.Replace(set.items, ""); err != nil {
			t.Fatal(err)
		}
	}
	env.lh.ClearActions()
}

func anys[T any](items []T) []any {
	out := make([]any, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// sync syncs "vol" once and returns the writes it made.
func (env *syncEnv) sync(t *testing.T) (kit.Result, []string) {
	t.Helper()
	env.lh.ClearActions()
	res, err := env.c.sync(context.Background(), "ns/vol")
	if err != nil {
		t.Fatalf("sync: %v", err)
	}
	return res, synctable.Writes(env.lh.Actions())
}

// settle syncs "vol" until a sync writes nothing, loading the caches after
// each: the state the controller leaves.
func (env *syncEnv) settle(t *testing.T) {
	t.Helper()
	for range 10 {
		if _, writes := env.sync(t); len(writes) == 0 {
			return
		}
		env.load(t)
	}
	t.Fatal("the volume's syncs still write after 10")
}

func (env *syncEnv) volume(t *testing.T) *longhorn.Volume {
	t.Helper()
	v, err := env.lh.LonghornV1beta2().Volumes("ns").Get(context.Background(), "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// update changes "vol" in the clientset and loads the caches.
func (env *syncEnv) update(t *testing.T, mutate func(*longhorn.Volume)) {
	t.Helper()
	v := env.volume(t)
	mutate(v)
	if _, err := env.lh.LonghornV1beta2().Volumes("ns").Update(context.Background(), v, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.load(t)
}

// TestControllerSync is the volume controller's sync state by state, on
// fake clientsets and this node's real engines (replicas in a temporary
// disk of node-1): each case builds the state (from objects, or from what
// earlier syncs left, settled, then changed), syncs "vol" once, and checks
// the exact writes and what they left.
func TestControllerSync(t *testing.T) {
	attached := func(v *longhorn.Volume) { v.Spec.NodeID = "node-1" }
	deleting := func(v *longhorn.Volume) { v.DeletionTimestamp = &metav1.Time{Time: syncNow} }
	for _, tc := range []struct {
		name string
		// volume is "vol" as the case starts (settled first when settle).
		volume    *longhorn.Volume
		node2Up   bool
		settle    bool
		change    func(*longhorn.Volume) // applied after settling
		snapshots []*longhorn.Snapshot   // made after settling
		writes    []string
		requeue   time.Duration
		check     func(*testing.T, *syncEnv, string)
	}{
		{
			name:   "a new volume with no owner: claimed, and nothing else in that sync",
			volume: syncVolume(func(v *longhorn.Volume) { v.Finalizers, v.Labels, v.Status = nil, nil, longhorn.VolumeStatus{} }),
			writes: []string{"update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); v.Status.OwnerID != "node-1" || kit.HasFinalizer(v) {
					t.Errorf("owner %q, finalizers %v", v.Status.OwnerID, v.Finalizers)
				}
			},
		},
		{
			name:   "owned, without the finalizer: the finalizer, in a write that also gives the default group's label (every Volume write does)",
			volume: syncVolume(func(v *longhorn.Volume) { v.Finalizers, v.Labels = nil, nil }),
			writes: []string{"update volumes"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); !kit.HasFinalizer(v) || v.Labels[types.RecurringJobGroupLabelKey(types.RecurringJobGroupDefault)] != "enabled" {
					t.Errorf("finalizers %v, labels %v", v.Finalizers, v.Labels)
				}
			},
		},
		{
			name:   "finalized, selecting no recurring job: the default group's label alone",
			volume: syncVolume(func(v *longhorn.Volume) { v.Labels = nil }),
			writes: []string{"update volumes"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); v.Labels[types.RecurringJobGroupLabelKey(types.RecurringJobGroupDefault)] != "enabled" {
					t.Errorf("labels %v, want the default group", v.Labels)
				}
			},
		},
		{
			name:   "a new volume, finalized and labelled: its Replica and Engine made, their status and the volume's (detached, scheduled)",
			volume: syncVolume(),
			writes: []string{"create replicas", "create engines", "update engines/status", "update replicas/status", "update volumes/status"},
			check: func(t *testing.T, env *syncEnv, disk string) {
				ctx := context.Background()
				r, err := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Spec.NodeID != "node-1" || r.Spec.DiskID != "disk-uuid-1" || r.Spec.DiskPath != disk || r.Spec.DataDirectoryName != "vol-01234567-0" ||
					r.Spec.VolumeSize != 4<<20 || r.Labels[types.LabelVolume] != "vol" || len(r.OwnerReferences) != 1 || r.Spec.HealthyAt != "" {
					t.Errorf("replica %+v", r)
				}
				if r.Status.CurrentState != longhorn.InstanceStateStopped || r.Status.OwnerID != "node-1" {
					t.Errorf("replica status %+v", r.Status)
				}
				e, err := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if e.Spec.VolumeName != "vol" || e.Spec.ReplicaAddressMap["vol-r-0"] != filepath.Join(disk, replica.ReplicasFolder, "vol-01234567-0") ||
					e.Status.CurrentState != longhorn.InstanceStateStopped {
					t.Errorf("engine spec %+v, status %+v", e.Spec, e.Status)
				}
				v := env.volume(t)
				if v.Status.State != longhorn.VolumeStateDetached || v.Status.Robustness != longhorn.VolumeRobustnessUnknown ||
					kit.GetCondition(v.Status.Conditions, ConditionTypeScheduled).Status != longhorn.ConditionStatusTrue {
					t.Errorf("volume status %+v", v.Status)
				}
			},
		},
		{
			name:   "a detached volume in sync: no write",
			volume: syncVolume(),
			settle: true,
			check: func(t *testing.T, env *syncEnv, _ string) {
				if _, running := env.instances.Get("vol"); running {
					t.Error("an engine runs for a detached volume")
				}
			},
		},
		{
			name:    "owned by another node that is up: no write",
			volume:  syncVolume(func(v *longhorn.Volume) { v.Finalizers, v.Labels, v.Status.OwnerID = nil, nil, "node-2" }),
			node2Up: true,
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); v.Status.OwnerID != "node-2" {
					t.Errorf("owner %q", v.Status.OwnerID)
				}
			},
		},
		{
			name:   "owned by another node that is down: claimed",
			volume: syncVolume(func(v *longhorn.Volume) { v.Status.OwnerID = "node-2" }),
			writes: []string{"update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); v.Status.OwnerID != "node-1" {
					t.Errorf("owner %q", v.Status.OwnerID)
				}
			},
		},
		{
			name:   "a detached volume asked to attach here: the engine started, the replica marked healthy, status attached",
			volume: syncVolume(),
			settle: true,
			change: attached,
			writes: []string{"update engines", "update replicas", "update engines/status", "update replicas/status", "update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				run, running := env.instances.Get("vol")
				if !running || run.Endpoint == "" {
					t.Fatalf("engine running %v, endpoint %q", running, run.Endpoint)
				}
				v := env.volume(t)
				if v.Status.State != longhorn.VolumeStateAttached || v.Status.CurrentNodeID != "node-1" || v.Status.Robustness != longhorn.VolumeRobustnessHealthy ||
					kit.GetCondition(v.Status.Conditions, ConditionTypeAttach).Status != longhorn.ConditionStatusTrue {
					t.Errorf("volume status %+v", v.Status)
				}
				ctx := context.Background()
				e, _ := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if e.Spec.NodeID != "node-1" || e.Spec.DesireState != longhorn.InstanceStateRunning || e.Status.CurrentState != longhorn.InstanceStateRunning ||
					e.Status.Endpoint != run.Endpoint || e.Status.Port != 9501 || e.Status.ReplicaModeMap["vol-r-0"] != longhorn.ReplicaModeRW {
					t.Errorf("engine spec %+v, status %+v", e.Spec, e.Status)
				}
				r, _ := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if r.Spec.HealthyAt != syncNow.Format(time.RFC3339) || r.Status.CurrentState != longhorn.InstanceStateRunning || !r.Status.Started {
					t.Errorf("replica healthyAt %q, status %+v", r.Spec.HealthyAt, r.Status)
				}
			},
		},
		{
			name:   "an attached volume in sync: no write, the engine still runs",
			volume: syncVolume(attached),
			settle: true,
			check: func(t *testing.T, env *syncEnv, _ string) {
				if _, running := env.instances.Get("vol"); !running {
					t.Error("the engine stopped")
				}
			},
		},
		{
			name:   "an attached volume asked to detach: the engine stopped, the Engine's spec and status stopped, the replica stopped, status detached",
			volume: syncVolume(attached),
			settle: true,
			change: func(v *longhorn.Volume) { v.Spec.NodeID = "" },
			writes: []string{"update engines", "update engines/status", "update replicas/status", "update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if _, running := env.instances.Get("vol"); running {
					t.Error("the engine still runs")
				}
				v := env.volume(t)
				if v.Status.State != longhorn.VolumeStateDetached || v.Status.CurrentNodeID != "" ||
					kit.GetCondition(v.Status.Conditions, ConditionTypeAttach).Status != longhorn.ConditionStatusUnknown {
					t.Errorf("volume status %+v", v.Status)
				}
				ctx := context.Background()
				e, _ := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if e.Spec.NodeID != "" || e.Spec.DesireState != longhorn.InstanceStateStopped || e.Status.CurrentState != longhorn.InstanceStateStopped || e.Status.Endpoint != "" {
					t.Errorf("engine spec %+v, status %+v", e.Spec, e.Status)
				}
				r, _ := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if r.Status.CurrentState != longhorn.InstanceStateStopped || r.Status.Started || r.Spec.HealthyAt == "" {
					t.Errorf("replica healthyAt %q, status %+v", r.Spec.HealthyAt, r.Status)
				}
			},
		},
		{
			name:   "an attached volume being deleted: the engine stopped, the replica's data removed, the finalizer dropped (its objects go by owner reference)",
			volume: syncVolume(attached),
			settle: true,
			change: deleting,
			writes: []string{"update volumes"},
			check: func(t *testing.T, env *syncEnv, disk string) {
				if _, running := env.instances.Get("vol"); running {
					t.Error("the engine still runs")
				}
				if v := env.volume(t); kit.HasFinalizer(v) {
					t.Errorf("finalizers %v", v.Finalizers)
				}
				if _, err := os.Stat(filepath.Join(disk, replica.ReplicasFolder, "vol-01234567-0")); !os.IsNotExist(err) {
					t.Errorf("the replica's data is still there: %v", err)
				}
			},
		},
		{
			name:   "a volume being deleted that has a Snapshot: the Snapshot deleted, the finalizer kept, a look again in a second",
			volume: syncVolume(attached),
			settle: true,
			change: deleting,
			snapshots: []*longhorn.Snapshot{{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns", Labels: map[string]string{types.LabelVolume: "vol"}},
				Spec: longhorn.SnapshotSpec{Volume: "vol"}}},
			writes:  []string{"delete snapshots"},
			requeue: time.Second,
			check: func(t *testing.T, env *syncEnv, _ string) {
				if v := env.volume(t); !kit.HasFinalizer(v) {
					t.Error("the finalizer went before the volume's snapshots")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := t.TempDir() // made before the engines: its removal runs after they stop
			env := newSyncEnv(t, tc.volume, syncNode("node-1", true, disk), syncNode("node-2", tc.node2Up, ""))
			if tc.settle {
				env.settle(t)
			}
			if tc.change != nil {
				env.update(t, tc.change)
			}
			for _, s := range tc.snapshots {
				if _, err := env.lh.LonghornV1beta2().Snapshots("ns").Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			env.load(t)

			res, writes := env.sync(t)
			if !slices.Equal(writes, tc.writes) {
				t.Errorf("writes %v, want %v", writes, tc.writes)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.requeue)
			}
			if tc.check != nil {
				tc.check(t, env, disk)
			}
		})
	}
}
