package volume

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/synctable"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestSyncAttachmentRefusals is the sync table (sync_table_test.go's
// helpers) of the attachments that do not happen: the volume's writes,
// and the error a sync returns, when its engine does not start or may not
// run here, or its restore fails.
func TestSyncAttachmentRefusals(t *testing.T) {
	attached := func(v *longhorn.Volume) { v.Spec.NodeID = "node-1" }
	detached := func(v *longhorn.Volume) { v.Spec.NodeID = "" }
	dataDir := func(disk string) string { return filepath.Join(disk, replica.ReplicasFolder, "vol-01234567-0") }
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		volume *longhorn.Volume
		// prepare builds the state from the volume, settled or not; the
		// sync that follows is the case's.
		prepare func(*testing.T, *syncEnv, string)
		writes  []string
		err     string // in the sync's error; "" for none
		check   func(*testing.T, *syncEnv, string)
	}{
		{
			name:   "attached here, the replica's data gone: no engine; the Engine's status error, the replica error, Attach False ReplicaDataMissing, the error returned",
			volume: syncVolume(attached),
			prepare: func(t *testing.T, env *syncEnv, disk string) {
				env.settle(t)
				env.update(t, detached)
				env.settle(t)
				if err := os.RemoveAll(dataDir(disk)); err != nil {
					t.Fatal(err)
				}
				env.update(t, attached)
			},
			writes: []string{"update engines", "update engines/status", "update replicas/status", "update volumes/status"},
			err:    "vol-r-0",
			check: func(t *testing.T, env *syncEnv, _ string) {
				if _, running := env.instances.Get("vol"); running {
					t.Error("an engine runs")
				}
				v := env.volume(t)
				if cond := kit.GetCondition(v.Status.Conditions, ConditionTypeAttach); cond.Status != longhorn.ConditionStatusFalse || cond.Reason != ReasonReplicaDataMissing {
					t.Errorf("Attach condition %+v", cond)
				}
				e, _ := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if e.Status.CurrentState != longhorn.InstanceStateError {
					t.Errorf("engine status %+v", e.Status)
				}
				r, _ := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if r.Status.CurrentState != longhorn.InstanceStateError || r.Spec.FailedAt != "" {
					t.Errorf("replica failedAt %q, status %+v", r.Spec.FailedAt, r.Status)
				}
			},
		},
		{
			name:   "attached here, its only replica failed: no engine, Attach False AllReplicasFailed, faulted, the replica's Failed condition",
			volume: syncVolume(),
			prepare: func(t *testing.T, env *syncEnv, _ string) {
				env.settle(t)
				r, err := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				r.Spec.FailedAt = syncNow.Format(time.RFC3339)
				if _, err := env.lh.LonghornV1beta2().Replicas("ns").Update(ctx, r, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				env.update(t, attached)
			},
			writes: []string{"update engines", "update replicas/status", "update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				if _, running := env.instances.Get("vol"); running {
					t.Error("an engine runs")
				}
				v := env.volume(t)
				if cond := kit.GetCondition(v.Status.Conditions, ConditionTypeAttach); cond.Status != longhorn.ConditionStatusFalse || cond.Reason != ReasonAllReplicasFailed ||
					v.Status.Robustness != longhorn.VolumeRobustnessFaulted || v.Status.State != longhorn.VolumeStateDetached ||
					kit.GetCondition(v.Status.Conditions, ConditionTypeReplicaFailed).Status != longhorn.ConditionStatusTrue {
					t.Errorf("volume status %+v", v.Status)
				}
				r, _ := env.lh.LonghornV1beta2().Replicas("ns").Get(ctx, "vol-r-0", metav1.GetOptions{})
				if r.Status.CurrentState != longhorn.InstanceStateError || kit.GetCondition(r.Status.Conditions, longhorn.ReplicaConditionTypeFailed).Reason != reasonFailedAtSet {
					t.Errorf("replica status %+v", r.Status)
				}
			},
		},
		{
			name:   "attached here, the replica's disk replaced by another at its path: no engine, the Engine not moved here, Attach False ReplicaDiskMissing",
			volume: syncVolume(),
			prepare: func(t *testing.T, env *syncEnv, _ string) {
				env.settle(t)
				n, err := env.lh.LonghornV1beta2().Nodes("ns").Get(ctx, "node-1", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				n.Status.DiskStatus["disk-1"].DiskUUID = "disk-uuid-2"
				if _, err := env.lh.LonghornV1beta2().Nodes("ns").UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				env.update(t, attached)
			},
			writes: []string{"update volumes/status"},
			check: func(t *testing.T, env *syncEnv, _ string) {
				v := env.volume(t)
				if cond := kit.GetCondition(v.Status.Conditions, ConditionTypeAttach); cond.Status != longhorn.ConditionStatusFalse || cond.Reason != ReasonReplicaDiskMissing ||
					!strings.Contains(cond.Message, "disk-uuid-1") {
					t.Errorf("Attach condition %+v", cond)
				}
				e, _ := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if e.Spec.NodeID != "" {
					t.Errorf("engine spec %+v", e.Spec)
				}
			},
		},
		{
			name:   "a restore that failed (no such backup): the Engine's restore status error, Restore False RestoreFailed, the error returned",
			volume: syncVolume(),
			prepare: func(t *testing.T, env *syncEnv, _ string) {
				env.update(t, func(v *longhorn.Volume) { v.Spec.FromBackup = "file://" + t.TempDir() + "?backup=b1&volume=vol" })
				// The first sync makes the objects and starts the restore;
				// the Engine's spec is completed by the next.
				if _, err := env.c.sync(ctx, "ns/vol"); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(10 * time.Second); env.c.restoring("vol"); time.Sleep(10 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatal("the restore still runs")
					}
				}
				env.load(t)
			},
			writes: []string{"update engines", "update engines/status", "update volumes/status"},
			err:    "restore volume vol from",
			check: func(t *testing.T, env *syncEnv, _ string) {
				v := env.volume(t)
				if cond := kit.GetCondition(v.Status.Conditions, ConditionTypeRestore); cond.Status != longhorn.ConditionStatusFalse || cond.Reason != ReasonRestoreFailed ||
					!v.Status.RestoreRequired {
					t.Errorf("volume status %+v", v.Status)
				}
				e, _ := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
				if st := e.Status.RestoreStatus["vol-r-0"]; st == nil || st.State != "error" || st.Error == "" || e.Status.LastRestoredBackup != "" {
					t.Errorf("engine status %+v", e.Status)
				}
			},
		},
		{
			name: "a clone whose source's replicas are on node-2, which is down: the Clone condition says so, the error returned, nothing made",
			volume: syncVolume(func(v *longhorn.Volume) {
				v.Spec.DataSource = "vol://src"
				v.Status.OwnerID = ""
			}),
			prepare: func(t *testing.T, env *syncEnv, _ string) {
				src := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "src", Namespace: "ns"}, Spec: longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1}}
				r := &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: "src-r-0", Namespace: "ns", Labels: map[string]string{types.LabelVolume: "src"}},
					Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "src", NodeID: "node-2"}}}
				if _, err := env.lh.LonghornV1beta2().Volumes("ns").Create(ctx, src, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				if _, err := env.lh.LonghornV1beta2().Replicas("ns").Create(ctx, r, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				env.load(t)
				// The first sync claims the volume.
				if _, err := env.c.sync(ctx, "ns/vol"); err != nil {
					t.Fatal(err)
				}
				env.load(t)
			},
			writes: []string{"update volumes/status"},
			err:    "on node node-2",
			check: func(t *testing.T, env *syncEnv, _ string) {
				v := env.volume(t)
				if cond := kit.GetCondition(v.Status.Conditions, ConditionTypeClone); cond.Status != longhorn.ConditionStatusFalse || cond.Reason != ReasonCloning {
					t.Errorf("Clone condition %+v", cond)
				}
				if _, err := env.lh.LonghornV1beta2().Engines("ns").Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{}); err == nil {
					t.Error("an Engine was made")
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			disk := t.TempDir() // made before the engines: its removal runs after they stop
			env := newSyncEnv(t, tc.volume, syncNode("node-1", true, disk), syncNode("node-2", false, ""))
			tc.prepare(t, env, disk)
			env.lh.ClearActions()
			_, err := env.c.sync(ctx, "ns/vol")
			if writes := synctable.Writes(env.lh.Actions()); !slices.Equal(writes, tc.writes) {
				t.Errorf("writes %v, want %v", writes, tc.writes)
			}
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("sync: %v, want an error with %q", err, tc.err)
			}
			tc.check(t, env, disk)
		})
	}
}

// A volume with no node whose engine runs because a clone reads it is
// attached here without a frontend and has no Attach condition; a later
// sync with nothing new writes nothing. (Setting the condition each sync
// after removing it gave it a new transition time, and so the Volume a
// status write, every second the clone ran.)
func TestADetachedCloneSourceHasNoAttachCondition(t *testing.T) {
	disk := t.TempDir() // made before the engines: its removal runs after they stop
	env := newSyncEnv(t, syncVolume(func(v *longhorn.Volume) { v.Spec.NodeID = "" }), syncNode("node-1", true, disk))
	clk := clocktesting.NewFakeClock(syncNow)
	env.c.clock = clk
	env.settle(t)
	if _, running := env.instances.Get("vol"); running {
		t.Fatal("the engine of a detached volume runs")
	}
	// A clone of it starts reading it.
	env.c.clones.mu.Lock()
	env.c.clones.runs = map[string]*cloneRun{"clone": {dataSource: "vol", source: "vol"}}
	env.c.clones.mu.Unlock()
	env.settle(t)
	run, running := env.instances.Get("vol")
	if !running || run.Endpoint != "" {
		t.Fatalf("the engine for the clone: running %v, endpoint %q; want it running without a frontend", running, run.Endpoint)
	}
	v := env.volume(t)
	if i := slices.IndexFunc(v.Status.Conditions, func(c longhorn.Condition) bool { return c.Type == ConditionTypeAttach }); i >= 0 {
		t.Errorf("Attach condition %+v on a volume with no node", v.Status.Conditions[i])
	}
	if v.Status.State != longhorn.VolumeStateAttached || !v.Status.FrontendDisabled {
		t.Errorf("state %s, frontend disabled %v; want attached without a frontend", v.Status.State, v.Status.FrontendDisabled)
	}
	clk.Step(3 * time.Second)
	if _, writes := env.sync(t); len(writes) != 0 {
		t.Errorf("a sync with nothing new wrote %v", writes)
	}
}

// A detached volume's snapshots are read from its Engine's list until it
// attaches again: the detach writes the engine's last list, also when no
// mirror wrote it since the snapshot was taken (a list-only change waits
// for engineListPace; here the detach comes first).
func TestADetachWritesTheEnginesLastSnapshotList(t *testing.T) {
	disk := t.TempDir() // made before the engines: its removal runs after they stop
	env := newSyncEnv(t, syncVolume(func(v *longhorn.Volume) { v.Spec.NodeID = "node-1" }), syncNode("node-1", true, disk))
	env.settle(t)
	run, running := env.instances.Get("vol")
	if !running {
		t.Fatal("the attached volume's engine does not run")
	}
	if _, err := run.Engine.CreateSnapshot("just-taken", nil); err != nil {
		t.Fatal(err)
	}
	env.update(t, func(v *longhorn.Volume) { v.Spec.NodeID = "" })
	env.settle(t)
	if _, running := env.instances.Get("vol"); running {
		t.Fatal("the engine runs after the detach")
	}
	e, err := env.lh.LonghornV1beta2().Engines("ns").Get(context.Background(), datastore.EngineName("vol"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Status.CurrentState != longhorn.InstanceStateStopped {
		t.Errorf("engine state %s after the detach", e.Status.CurrentState)
	}
	if _, listed := e.Status.Snapshots["just-taken"]; !listed {
		t.Errorf("the detached volume's Engine lists %v: not the snapshot taken before the detach", slices.Sorted(maps.Keys(e.Status.Snapshots)))
	}
}
