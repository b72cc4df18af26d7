package snapshot

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	lhinformers "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/informers/externalversions/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// testEngines is this node's engine runtime for a test, at a fake clock,
// and a folder for its replicas, removed after the engines stop.
func testEngines(t *testing.T, log *logrus.Logger) (*instance.Engines, string) {
	t.Helper()
	dir := t.TempDir() // made first: its removal runs after the engines stop
	instances := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clocktesting.NewFakeClock(time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)),
		logrus.NewEntry(log), func(string) {}, func(string) {})
	t.Cleanup(instances.StopAll)
	return instances, dir
}

// tableVolume is volume "vol" of 4 MiB, owned by owner.
func tableVolume(owner string) *longhorn.Volume {
	return &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", UID: "vol-uid"},
		Spec: longhorn.VolumeSpec{Size: 4 << 20}, Status: longhorn.VolumeStatus{OwnerID: owner}}
}

// tableEngine is the Engine object of "vol" in state.
func tableEngine(state longhorn.InstanceState) *longhorn.Engine {
	return &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: datastore.EngineName("vol"), Namespace: "ns"},
		Spec:   longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}},
		Status: longhorn.EngineStatus{InstanceStatus: longhorn.InstanceStatus{CurrentState: state}}}
}

// tableSnapshot is Snapshot "s1" of "vol" as the controller leaves it:
// volume label, finalizer and owner reference.
func tableSnapshot(mutate ...func(*longhorn.Snapshot)) *longhorn.Snapshot {
	s := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: "ns",
		Labels: map[string]string{types.LabelVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer},
		OwnerReferences: kit.OwnedBy(tableVolume("node-1"))},
		Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true, Labels: map[string]string{"k": "v"}}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

// snapshotEnv is a snapshot controller of node-1 over fake clientsets
// holding objects (Volumes, Engines and Snapshots) in the clientset and
// its informers' caches.
func snapshotEnv(t *testing.T, log *logrus.Logger, instances *instance.Engines, objects ...runtime.Object) (*Controller, *lhfake.Clientset, lhinformers.Interface) {
	t.Helper()
	lh := lhfake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	lhi := inf.Longhorn.Longhorn().V1beta2()
	for _, obj := range objects {
		var err error
		switch o := obj.(type) {
		case *longhorn.Volume:
			err = lhi.Volumes().Informer().GetIndexer().Add(o)
		case *longhorn.Engine:
			err = lhi.Engines().Informer().GetIndexer().Add(o)
		case *longhorn.Snapshot:
			err = lhi.Snapshots().Informer().GetIndexer().Add(o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	c := NewController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", instance.Local(instances))
	t.Cleanup(c.Queue.ShutDown)
	return c, lh, lhi
}

// TestControllerSync is the snapshot controller's sync state by state, on
// fake clientsets and a real engine of "vol" on node-1 (one replica in a
// temporary folder): each case builds the engine's snapshots and the
// objects, syncs "s1" once, and checks the exact writes, what they left
// and the engine after.
func TestControllerSync(t *testing.T) {
	deleted := func(s *longhorn.Snapshot) {
		s.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)}
	}
	// inSync gives the object the status the engine's entry of s1 shows.
	inSync := func(t *testing.T, e *volumeengine.Engine) func(*longhorn.Snapshot) {
		return func(s *longhorn.Snapshot) {
			taken, err := e.Snapshot("s1")
			if err != nil {
				t.Fatal(err)
			}
			s.Status = snapshotStatus(kit.SnapshotInfo(taken), tableVolume("node-1"), "node-1")
		}
	}
	take := func(t *testing.T, e *volumeengine.Engine) {
		t.Helper()
		if _, err := e.CreateSnapshot("s1", map[string]string{"k": "v"}); err != nil {
			t.Fatal(err)
		}
	}
	engineHas := func(removed bool) func(*testing.T, *volumeengine.Engine) {
		return func(t *testing.T, e *volumeengine.Engine) {
			t.Helper()
			s, err := e.Snapshot("s1")
			if err != nil || s.Removed != removed {
				t.Errorf("the engine's s1: %+v, %v; want it there, removed %v", s, err, removed)
			}
		}
	}
	engineLacks := func(t *testing.T, e *volumeengine.Engine) {
		t.Helper()
		if s, err := e.Snapshot("s1"); err == nil {
			t.Errorf("the engine has s1: %+v", s)
		}
	}
	finalizer := func(want bool) func(*testing.T, *longhorn.Snapshot) {
		return func(t *testing.T, s *longhorn.Snapshot) {
			t.Helper()
			if kit.HasFinalizer(s) != want {
				t.Errorf("finalizers %v, want the finalizer %v", s.Finalizers, want)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		stopped bool   // no engine of "vol" runs on this node
		owner   string // of the Volume: node-1 when "", none when "-"
		prepare func(*testing.T, *volumeengine.Engine)
		// objects are the objects besides the Volume and the Engine
		// (running, unless stopped), given the engine when it runs.
		objects func(*testing.T, *volumeengine.Engine) []runtime.Object
		writes  []string
		requeue time.Duration
		check   func(*testing.T, *longhorn.Snapshot) // the stored s1, nil when there is none
		engine  func(*testing.T, *volumeengine.Engine)
	}{
		{
			name: "a new Snapshot with createSnapshot: label, finalizer and owner in one write, then the engine snapshot (its status comes with the engine's next round)",
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableSnapshot(func(s *longhorn.Snapshot) { s.Labels, s.Finalizers, s.OwnerReferences = nil, nil, nil })}
			},
			writes: []string{"update snapshots"},
			check: func(t *testing.T, s *longhorn.Snapshot) {
				if s.Labels[types.LabelVolume] != "vol" || !kit.HasFinalizer(s) || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "vol-uid" {
					t.Errorf("labels %v, finalizers %v, owner references %+v", s.Labels, s.Finalizers, s.OwnerReferences)
				}
				if s.Status.CreationTime != "" || s.Status.ReadyToUse {
					t.Errorf("status written in the same sync: %+v", s.Status)
				}
			},
			engine: func(t *testing.T, e *volumeengine.Engine) {
				t.Helper()
				s, err := e.Snapshot("s1")
				if err != nil || s.Removed || !s.UserCreated || s.Labels["k"] != "v" {
					t.Errorf("the engine's s1: %+v, %v; want it taken with the labels", s, err)
				}
			},
		},
		{
			name:    "taken in the engine, the object without a status: one status write from the engine's entry",
			prepare: take,
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object { return []runtime.Object{tableSnapshot()} },
			writes:  []string{"update snapshots/status"},
			check: func(t *testing.T, s *longhorn.Snapshot) {
				if !s.Status.ReadyToUse || s.Status.CreationTime == "" || s.Status.OwnerID != "node-1" || s.Status.RestoreSize != 4<<20 ||
					!s.Status.UserCreated || s.Status.Labels["k"] != "v" || !s.Status.Children["volume-head"] || s.Status.Error != "" {
					t.Errorf("status %+v, want the engine's entry, ready to use", s.Status)
				}
			},
			engine: engineHas(false),
		},
		{
			name:    "in sync with the engine: no write",
			prepare: take,
			objects: func(t *testing.T, e *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableSnapshot(inSync(t, e))}
			},
			engine: engineHas(false),
		},
		{
			name:    "a status change alone (a child taken since): one status write, no metadata write",
			prepare: take,
			objects: func(t *testing.T, e *volumeengine.Engine) []runtime.Object {
				s := tableSnapshot(inSync(t, e))
				if _, err := e.CreateSnapshot("s2", nil); err != nil {
					t.Fatal(err)
				}
				return []runtime.Object{s}
			},
			writes: []string{"update snapshots/status"},
			check: func(t *testing.T, s *longhorn.Snapshot) {
				if !s.Status.Children["s2"] || s.Status.Children["volume-head"] || !s.Status.ReadyToUse {
					t.Errorf("status %+v, want s2 its child", s.Status)
				}
			},
		},
		{
			name:    "its volume owned by another node: no write, and the engine not asked",
			owner:   "node-2",
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object { return []runtime.Object{tableSnapshot()} },
			engine:  engineLacks,
		},
		{
			name:    "being deleted, in the engine: deleted there, the status says marked removed, the finalizer stays (the purge ends it)",
			prepare: take,
			objects: func(t *testing.T, e *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableSnapshot(inSync(t, e), deleted)}
			},
			writes: []string{"update snapshots/status"},
			check: func(t *testing.T, s *longhorn.Snapshot) {
				finalizer(true)(t, s)
				if !s.Status.MarkRemoved || s.Status.ReadyToUse {
					t.Errorf("status %+v, want marked removed, not ready", s.Status)
				}
			},
			engine: func(t *testing.T, e *volumeengine.Engine) {
				t.Helper()
				if s, err := e.Snapshot("s1"); err == nil && !s.Removed {
					t.Errorf("the engine's s1 is not marked removed: %+v", s)
				}
			},
		},
		{
			name: "being deleted, gone from the engine: the finalizer dropped",
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableSnapshot(deleted, func(s *longhorn.Snapshot) { s.Status.CreationTime, s.Status.MarkRemoved = "2026-11-26T00:00:00Z", true })}
			},
			writes: []string{"update snapshots"},
			check:  finalizer(false),
		},
		{
			name:    "being deleted while its engine is stopped: status.error says it waits, and a look again after deletionRecheck",
			stopped: true,
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableEngine(longhorn.InstanceStateStopped),
					tableSnapshot(deleted, func(s *longhorn.Snapshot) { s.Status.CreationTime = "2026-11-26T00:00:00Z" })}
			},
			writes:  []string{"update snapshots/status"},
			requeue: deletionRecheck,
			check: func(t *testing.T, s *longhorn.Snapshot) {
				finalizer(true)(t, s)
				if !strings.Contains(s.Status.Error, "the deletion waits for volume vol to be attached") || s.Status.ReadyToUse {
					t.Errorf("status %+v, want why the deletion waits", s.Status)
				}
			},
		},
		{
			// The CSI driver's DeleteSnapshot right after its
			// CreateSnapshot: the detach and attach again stopped and
			// started the engine, and the Engine object still says
			// running from a mirror older than the snapshot. The
			// finalizer was released on that, and the engine snapshot,
			// still there, was adopted back: the deletion was lost.
			name:    "being deleted while its engine is stopped, the Engine's mirror (which lags) says running without the snapshot: the finalizer stays, status.error says it waits",
			stopped: true,
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableEngine(longhorn.InstanceStateRunning),
					tableSnapshot(deleted, func(s *longhorn.Snapshot) { s.Status.CreationTime = "2026-11-26T00:00:00Z" })}
			},
			writes:  []string{"update snapshots/status"},
			requeue: deletionRecheck,
			check: func(t *testing.T, s *longhorn.Snapshot) {
				finalizer(true)(t, s)
				if !strings.Contains(s.Status.Error, "the deletion waits for volume vol to be attached") {
					t.Errorf("status %+v, want why the deletion waits", s.Status)
				}
			},
		},
		{
			name:    "being deleted while its engine is stopped, the wait already said: no write, a look again after deletionRecheck",
			stopped: true,
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableEngine(longhorn.InstanceStateStopped), tableSnapshot(deleted, func(s *longhorn.Snapshot) {
					s.Status = longhorn.SnapshotStatus{CreationTime: "2026-11-26T00:00:00Z", OwnerID: "node-1",
						Error: "the deletion waits for volume vol to be attached: its engine deletes the snapshot's data"}
				})}
			},
			requeue: deletionRecheck,
			check:   finalizer(true),
		},
		{
			name: "taken in the engine with no object (the API, a recurring job): adopted, created with createSnapshot false",
			prepare: func(t *testing.T, e *volumeengine.Engine) {
				t.Helper()
				if _, err := e.CreateSnapshot("s1", map[string]string{types.LabelRecurringJob: "daily"}); err != nil {
					t.Fatal(err)
				}
			},
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object { return nil },
			writes:  []string{"create snapshots"},
			check: func(t *testing.T, s *longhorn.Snapshot) {
				if s.Spec.Volume != "vol" || s.Spec.CreateSnapshot || s.Spec.Labels[types.LabelRecurringJob] != "daily" {
					t.Errorf("spec %+v", s.Spec)
				}
				if s.Labels[types.LabelVolume] != "vol" || s.Labels[types.LabelRecurringJob] != "daily" || !kit.HasFinalizer(s) ||
					len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != "vol-uid" {
					t.Errorf("labels %v, finalizers %v, owner references %+v", s.Labels, s.Finalizers, s.OwnerReferences)
				}
			},
			engine: engineHas(false),
		},
		{
			name:  "its volume gone: the finalizer dropped (the data went with it)",
			owner: "-",
			objects: func(*testing.T, *volumeengine.Engine) []runtime.Object {
				return []runtime.Object{tableSnapshot()}
			},
			writes: []string{"update snapshots"},
			check:  finalizer(false),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			instances, dir := testEngines(t, log)
			var run instance.Running
			var e *volumeengine.Engine
			if !tc.stopped {
				var err error
				run, err = instances.Start("vol", 4<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(dir, "r1"), New: true}}, false)
				if err != nil {
					t.Fatal(err)
				}
				e = run.Engine
				if tc.prepare != nil {
					tc.prepare(t, e)
				}
			}
			objects := tc.objects(t, e)
			switch tc.owner {
			case "":
				objects = append(objects, tableVolume("node-1"))
			case "-":
			default:
				objects = append(objects, tableVolume(tc.owner))
			}
			if !tc.stopped {
				objects = append(objects, tableEngine(longhorn.InstanceStateRunning))
			}
			c, lh, _ := snapshotEnv(t, log, instances, objects...)
			lh.ClearActions()

			res, err := c.sync(context.Background(), "ns/s1")
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := synctable.Writes(lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			if res.RequeueAfter != tc.requeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, tc.requeue)
			}
			s, err := lh.LonghornV1beta2().Snapshots("ns").Get(context.Background(), "s1", metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				if tc.check != nil {
					t.Error("no Snapshot s1 after the sync")
				}
			case err != nil:
				t.Fatal(err)
			case tc.check != nil:
				tc.check(t, s)
			}
			if tc.engine != nil {
				tc.engine(t, e)
			}
		})
	}
}
