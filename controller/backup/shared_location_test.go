package backup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestLocationHolder: of the targets at one place the first made holds
// it, by name when made at once; a target alone at its place, or with no
// URL, holds its own.
func TestLocationHolder(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	at := func(name, location string, created time.Time) placedTarget {
		return placedTarget{target: datastore.Target{Name: name, Created: created}, location: location}
	}
	for _, tc := range []struct {
		name    string
		self    string
		targets []placedTarget
		holder  string
	}{
		{"alone at its place", "a", []placedTarget{at("a", "file:///x", t0), at("b", "file:///y", t0)}, ""},
		{"the second made at a place is refused", "b", []placedTarget{at("a", "file:///x", t0), at("b", "file:///x", t0.Add(time.Hour))}, "a"},
		{"the first made keeps it", "a", []placedTarget{at("a", "file:///x", t0), at("b", "file:///x", t0.Add(time.Hour))}, ""},
		{"made first, though named after", "default", []placedTarget{at("default", "file:///x", t0.Add(time.Hour)), at("offsite", "file:///x", t0)}, "offsite"},
		{"made at once: by name", "b", []placedTarget{at("a", "s3://bkt/p", t0), at("b", "s3://bkt/p", t0)}, "a"},
		{"no URL shares nothing", "b", []placedTarget{at("a", "", t0), at("b", "", t0.Add(time.Hour))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if h := locationHolder(tc.self, tc.targets); h != nil {
				got = h.target.Name
			}
			if got != tc.holder {
				t.Errorf("holder %q, want %q", got, tc.holder)
			}
		})
	}
}

// TestTargetsAtOnePlace: a BackupTarget made with kubectl at default's
// folder, written another way, is refused on its poll and its refresh,
// naming default, and mirrors nothing; and no deletion of a BackupVolume,
// in either target, deletes the backups the other's objects stand for.
func TestTargetsAtOnePlace(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name string
		// objects are those of the second target, made before it was
		// refused (or by hand), and deletions asked.
		objects []*longhorn.BackupVolume
		backups []*longhorn.Backup
		// sync is the key synced: second's poll, or a refresh of vol in
		// a target.
		sync   func(c *TargetController) string
		writes []string
		// left says whether the folder still holds vol's backup.
		left  bool
		check func(t *testing.T, f *fixture)
	}{{
		name:   "the second target's poll reads nothing and says which target holds the place",
		sync:   func(c *TargetController) string { return c.pollKey("second") },
		writes: nil,
		left:   true,
		check: func(t *testing.T, f *fixture) {
			bt, err := f.lh.LonghornV1beta2().BackupTargets("ns").Get(context.Background(), "second", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cond := bt.Status.Conditions
			if bt.Status.Available || len(cond) == 0 || !strings.Contains(cond[0].Message, "where backup target default does") {
				t.Errorf("second's status: %+v; want Unavailable naming default", bt.Status)
			}
		},
	}, {
		name: "a user's delete of the second target's BackupVolume deletes nothing from the place",
		objects: []*longhorn.BackupVolume{{ObjectMeta: metav1.ObjectMeta{Name: "vol-second", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer},
			DeletionTimestamp: &now, Labels: map[string]string{types.LabelBackupTarget: "second", types.LabelBackupVolume: "vol"}},
			Spec: longhorn.BackupVolumeSpec{BackupTargetName: "second", VolumeName: "vol"}}},
		sync:   func(c *TargetController) string { return c.refreshKeyIn("second", "vol") },
		writes: []string{"update backupvolumes/status vol-second"},
		left:   true,
	}, {
		name: "a user's delete of default's BackupVolume waits while the second target's objects stand for the backups",
		objects: []*longhorn.BackupVolume{
			{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}, DeletionTimestamp: &now,
				Labels: map[string]string{types.LabelBackupTarget: "default", types.LabelBackupVolume: "vol"}},
				Spec: longhorn.BackupVolumeSpec{BackupTargetName: "default", VolumeName: "vol"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "vol-second", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer},
				Labels: map[string]string{types.LabelBackupTarget: "second", types.LabelBackupVolume: "vol"}},
				Spec: longhorn.BackupVolumeSpec{BackupTargetName: "second", VolumeName: "vol"}},
		},
		sync:   func(c *TargetController) string { return c.refreshKeyIn(datastore.DefaultBackupTargetName, "vol") },
		writes: []string{"update backupvolumes/status vol"},
		left:   true,
		check: func(t *testing.T, f *fixture) {
			bv, err := f.lh.LonghornV1beta2().BackupVolumes("ns").Get(context.Background(), "vol", metav1.GetOptions{})
			if err != nil || !strings.Contains(bv.Status.Messages[BackupVolumeMessageDeletion], "BackupVolume vol-second of backup target second stands for them") {
				t.Errorf("default's BackupVolume: %+v, %v; want the deletion's wait said", bv.Status.Messages, err)
			}
		},
	}, {
		name: "so does it while a Backup object of the second target stands for one",
		objects: []*longhorn.BackupVolume{
			{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}, DeletionTimestamp: &now,
				Labels: map[string]string{types.LabelBackupTarget: "default", types.LabelBackupVolume: "vol"}},
				Spec: longhorn.BackupVolumeSpec{BackupTargetName: "default", VolumeName: "vol"}},
		},
		backups: []*longhorn.Backup{syncBackup("vol", "b-1", func(b *longhorn.Backup) {
			b.Name = "b-1-second"
			b.Labels[types.LabelBackupTarget], b.Status.BackupTargetName = "second", "second"
		})},
		sync:   func(c *TargetController) string { return c.refreshKeyIn(datastore.DefaultBackupTargetName, "vol") },
		writes: []string{"update backupvolumes/status vol"},
		left:   true,
	}, {
		name: "with no other object of the volume there, default's deletion deletes, as a user asked",
		objects: []*longhorn.BackupVolume{
			{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}, DeletionTimestamp: &now,
				Labels: map[string]string{types.LabelBackupTarget: "default", types.LabelBackupVolume: "vol"}},
				Spec: longhorn.BackupVolumeSpec{BackupTargetName: "default", VolumeName: "vol"}},
		},
		sync:   func(c *TargetController) string { return c.refreshKeyIn(datastore.DefaultBackupTargetName, "vol") },
		writes: []string{"update backupvolumes vol"},
		left:   false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []string{"vol/b-1"})
			// Another spelling of default's folder.
			f.addTargetAt(t, "second", "file://localhost"+f.root+"/")
			for _, bv := range tc.objects {
				if _, err := f.lh.LonghornV1beta2().BackupVolumes("ns").Create(context.Background(), bv, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				f.cache(t, bv)
			}
			for _, b := range tc.backups {
				if _, err := f.lh.LonghornV1beta2().Backups("ns").Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				f.cache(t, b)
			}
			f.lh.ClearActions()
			if _, err := f.c.sync(context.Background(), tc.sync(f.c)); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := lhWrites(f.lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			if got := holds(f.root, "vol", "b-1"); got != tc.left {
				t.Errorf("the folder holds vol's backup: %v, want %v", got, tc.left)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}
