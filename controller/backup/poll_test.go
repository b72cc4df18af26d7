package backup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

func TestDecidePoll(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	polled := lastPoll{target: "s3://b@r/", secret: "s", at: t0}
	for _, tc := range []struct {
		name     string
		last     lastPoll
		target   string
		secret   string
		interval time.Duration
		now      time.Time
		want     pollDecision
	}{
		{"the first poll is at start", lastPoll{}, "s3://b@r/", "s", 300 * time.Second, t0, pollDecision{due: true, next: 300 * time.Second}},
		{"between polls nothing is read", polled, "s3://b@r/", "s", 300 * time.Second, t0.Add(100 * time.Second), pollDecision{next: 200 * time.Second}},
		{"a poll each interval", polled, "s3://b@r/", "s", 300 * time.Second, t0.Add(300 * time.Second), pollDecision{due: true, next: 300 * time.Second}},
		{"a late poll runs at once", polled, "s3://b@r/", "s", 300 * time.Second, t0.Add(time.Hour), pollDecision{due: true, next: 300 * time.Second}},
		{"a new target is polled at once", polled, "s3://other@r/", "s", 300 * time.Second, t0.Add(time.Second), pollDecision{due: true, next: 300 * time.Second}},
		{"a new credential Secret is polled at once", polled, "s3://b@r/", "s2", 300 * time.Second, t0.Add(time.Second), pollDecision{due: true, next: 300 * time.Second}},
		{"a shorter interval times the next poll from the last", polled, "s3://b@r/", "s", 60 * time.Second, t0.Add(100 * time.Second), pollDecision{due: true, next: 60 * time.Second}},
		{"interval 0 never polls", polled, "s3://b@r/", "s", 0, t0.Add(time.Hour), pollDecision{}},
		{"interval 0 does not poll at start either", lastPoll{}, "s3://b@r/", "s", 0, t0, pollDecision{}},
		{"no target, no poll", polled, "", "s", 300 * time.Second, t0.Add(time.Hour), pollDecision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decidePoll(tc.last, tc.target, tc.secret, tc.interval, tc.now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func engineWith(backups map[string]longhorn.EngineBackupStatus) *longhorn.Engine {
	e := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0", Namespace: "ns"}, Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}}}
	if backups != nil {
		e.Status.BackupStatus = map[string]*longhorn.EngineBackupStatus{}
		for name, st := range backups {
			e.Status.BackupStatus[name] = &st
		}
	}
	return e
}

func TestEngineWork(t *testing.T) {
	running := longhorn.EngineBackupStatus{State: "InProgress", Progress: 10, SnapshotName: "s"}
	further := longhorn.EngineBackupStatus{State: "InProgress", Progress: 60, SnapshotName: "s"}
	done := longhorn.EngineBackupStatus{State: "Completed", Progress: 100, SnapshotName: "s"}
	failed := longhorn.EngineBackupStatus{State: "Error", Error: "boom", SnapshotName: "s"}
	snapshotTaken := engineWith(map[string]longhorn.EngineBackupStatus{"b1": done})
	snapshotTaken.Status.Snapshots = map[string]*longhorn.SnapshotInfo{"snap-1": {Name: "snap-1"}}
	for _, tc := range []struct {
		name     string
		old, cur *longhorn.Engine
		want     work
	}{
		{"a snapshot taken asks nothing", engineWith(map[string]longhorn.EngineBackupStatus{"b1": done}), snapshotTaken, workNone},
		{"an attach (an engine with no backups) asks nothing", engineWith(nil), engineWith(nil), workNone},
		{"an engine seen at start with finished backups asks nothing", nil, engineWith(map[string]longhorn.EngineBackupStatus{"b1": done}), workNone},
		{"a backup started is mirrored", engineWith(nil), engineWith(map[string]longhorn.EngineBackupStatus{"b2": running}), workMirror},
		{"a backup's progress is mirrored", engineWith(map[string]longhorn.EngineBackupStatus{"b2": running}), engineWith(map[string]longhorn.EngineBackupStatus{"b2": further}), workMirror},
		{"a backup failing refreshes its volume (the target may be at fault)", engineWith(map[string]longhorn.EngineBackupStatus{"b2": running}), engineWith(map[string]longhorn.EngineBackupStatus{"b2": failed}), workRefresh},
		{"a failed backup's entry unchanged asks nothing", engineWith(map[string]longhorn.EngineBackupStatus{"b2": failed}), engineWith(map[string]longhorn.EngineBackupStatus{"b2": failed}), workNone},
		{"a backup finished refreshes its volume", engineWith(map[string]longhorn.EngineBackupStatus{"b2": further}), engineWith(map[string]longhorn.EngineBackupStatus{"b2": done}), workRefresh},
		{"a running backup no engine reports refreshes its volume", engineWith(map[string]longhorn.EngineBackupStatus{"b2": further}), engineWith(nil), workRefresh},
		{"an engine deleted while backing up refreshes its volume", engineWith(map[string]longhorn.EngineBackupStatus{"b2": running}), nil, workRefresh},
		{"an engine deleted with finished backups asks nothing", engineWith(map[string]longhorn.EngineBackupStatus{"b1": done, "b3": failed}), nil, workNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := engineWork(tc.old, tc.cur); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPollTiming: between polls nothing is read, whatever happens to the
// target; the poll after the interval reads it.
func TestPollTiming(t *testing.T) {
	f := newFixture(t, []string{"vol/b-1"})
	sync := func() []string {
		t.Helper()
		f.lh.ClearActions()
		res, err := f.c.sync(context.Background(), f.c.key())
		if err != nil {
			t.Fatal(err)
		}
		f.cacheWrites(t)
		if res.RequeueAfter != 300*time.Second && res.RequeueAfter != 200*time.Second {
			t.Errorf("requeue after %v", res.RequeueAfter)
		}
		return lhWrites(f.lh.Actions())
	}
	if got := sync(); !slices.Equal(got, []string{"create backupvolumes", "create backups", "update backups/status b-1", "update backupvolumes/status vol"}) {
		t.Fatalf("first poll wrote %v", got)
	}
	// The target is emptied: a read of it would forget the objects.
	if err := os.RemoveAll(filepath.Join(f.root, "backupstore")); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(100 * time.Second)
	if got := sync(); len(got) != 0 {
		t.Fatalf("a sync between polls wrote %v: it read the target", got)
	}
	f.now = f.now.Add(200 * time.Second)
	if got := sync(); !slices.Equal(got, []string{"update backups b-1", "delete backups b-1", "update backupvolumes vol", "delete backupvolumes vol"}) {
		t.Fatalf("the poll after the interval wrote %v", got)
	}
}

// TestPollIntervalZero: no poll at all, not even at start.
func TestPollIntervalZero(t *testing.T) {
	f := newFixture(t, []string{"vol/b-1"}, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameBackupstorePollInterval), Namespace: "ns"}, Value: "0"})
	f.lh.ClearActions()
	res, err := f.c.sync(context.Background(), f.c.key())
	if err != nil || res.RequeueAfter != 0 || len(f.lh.Actions()) != 0 {
		t.Fatalf("sync: %+v, %v, actions %v; want nothing done and no requeue", res, err, f.lh.Actions())
	}
	if f.c.Health().Polling {
		t.Error("health says polling")
	}
}

// TestARefreshReadsOnlyItsVolume: a backup finished on one volume
// writes that volume's objects only, though the target changed for
// another; its BackupVolume is made before its Backup shows Completed.
func TestARefreshReadsOnlyItsVolume(t *testing.T) {
	f := newFixture(t, []string{"vol-a/b-1", "vol-b/b-2"}, syncBackup("vol-b", "b-gone"))
	f.lh.ClearActions()
	if _, err := f.c.sync(context.Background(), f.c.refreshKey("vol-a")); err != nil {
		t.Fatal(err)
	}
	want := []string{"create backupvolumes", "create backups", "update backups/status b-1", "update backupvolumes/status vol-a"}
	if got := lhWrites(f.lh.Actions()); !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
}

// TestAMirrorReadsNothing: a running backup's progress becomes a Backup
// object without a read of the target: an object the target no longer
// lists is left alone.
func TestAMirrorReadsNothing(t *testing.T) {
	e := engineWith(map[string]longhorn.EngineBackupStatus{"b-run": {State: "InProgress", Progress: 40, SnapshotName: "s"}})
	f := newFixture(t, nil, e, syncBackup("vol", "b-gone"))
	f.lh.ClearActions()
	if _, err := f.c.sync(context.Background(), f.c.mirrorKey("vol")); err != nil {
		t.Fatal(err)
	}
	want := []string{"create backups", "update backups/status b-run"}
	if got := lhWrites(f.lh.Actions()); !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
}

// TestBackupVolumeDeletion: deleting a BackupVolume deletes every backup
// of the volume from the target, then its objects; while a backup of the
// volume runs, it deletes nothing and says why.
func TestBackupVolumeDeletion(t *testing.T) {
	deletingBV := func() *longhorn.BackupVolume {
		now := metav1.Now()
		return &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}, DeletionTimestamp: &now}}
	}
	for _, tc := range []struct {
		name    string
		locked  bool
		writes  []string
		left    []string
		message string
	}{{
		name:   "every backup of the volume goes, the other volume's stay",
		writes: []string{"update backups b-1", "delete backups b-1", "update backups b-2", "delete backups b-2", "update backupvolumes vol"},
		left:   []string{"other/b-3"},
	}, {
		name:    "a backup of the volume running: nothing is deleted, the BackupVolume says why",
		locked:  true,
		writes:  []string{"update backupvolumes/status vol"},
		left:    []string{"other/b-3", "vol/b-1", "vol/b-2"},
		message: "the deletion of the volume's backups waits",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []string{"vol/b-1", "vol/b-2", "other/b-3"}, deletingBV(), syncBackup("vol", "b-1"), syncBackup("vol", "b-2"), syncBackup("other", "b-3"))
			if tc.locked {
				lock := filepath.Join(f.root, "backupstore", "volumes", "vol", "locks", "backup-x.lck")
				if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(lock, []byte(`{"kind":"backup","id":"x","host":"elsewhere"}`), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			f.lh.ClearActions()
			res, err := f.c.sync(context.Background(), f.c.refreshKey("vol"))
			if err != nil {
				t.Fatal(err)
			}
			if got := lhWrites(f.lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			var left []string
			for _, vol := range []string{"other", "vol"} {
				l, err := f.store.ScanVolume(vol)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; l != nil && i < len(l.Backups); i++ {
					left = append(left, vol+"/"+l.Backups[i].Name)
				}
			}
			if !slices.Equal(left, tc.left) {
				t.Errorf("the target holds %v, want %v", left, tc.left)
			}
			bv, err := f.lh.LonghornV1beta2().BackupVolumes("ns").Get(context.Background(), "vol", metav1.GetOptions{})
			if tc.message != "" {
				if err != nil || !strings.Contains(bv.Status.Messages[BackupVolumeMessageDeletion], tc.message) || res.RequeueAfter != deletionRetryPeriod {
					t.Errorf("the BackupVolume: %+v, %v, requeue %v", bv, err, res.RequeueAfter)
				}
			} else if kitFinalizers := bv.GetFinalizers(); err == nil && len(kitFinalizers) != 0 {
				t.Errorf("the BackupVolume keeps its finalizer: %v", kitFinalizers)
			}
		})
	}
}
