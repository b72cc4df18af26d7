package backup

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestBackupVolumeSync: what a refresh of one volume writes to its
// BackupVolume.
func TestBackupVolumeSync(t *testing.T) {
	synced := metav1.NewTime(time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name   string
		target []string
		bv     *longhorn.BackupVolume
		writes []string
		// labelled: every update of the BackupVolume labels it
		// delete-custom-resource-only.
		labelled bool
		check    func(t *testing.T, bv *longhorn.BackupVolume, err error)
	}{{
		name:   "one made before BackupVolumes had a finalizer and several targets gets one, and says it is default's, keeping its name",
		target: []string{"vol/b-1"},
		bv:     &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns"}},
		writes: []string{"create backups", "update backups/status b-1", "update backupvolumes vol", "update backupvolumes/status vol"},
		check: func(t *testing.T, bv *longhorn.BackupVolume, err error) {
			if err != nil || !slices.Contains(bv.Finalizers, types.LonghornFinalizer) {
				t.Errorf("the BackupVolume: %+v, %v; want the finalizer", bv, err)
			}
			if bv.Spec.BackupTargetName != "default" || bv.Spec.VolumeName != "vol" || bv.Labels[types.LabelBackupTarget] != "default" || bv.Labels[types.LabelBackupVolume] != "vol" {
				t.Errorf("the BackupVolume: %+v; want it default's, of vol", bv.ObjectMeta)
			}
		},
	}, {
		name:   "one the target no longer holds is labelled, then deleted: its finalizer deletes nothing",
		target: []string{"other/b-1"},
		bv:     &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}}},
		writes: []string{"update backupvolumes vol", "delete backupvolumes vol"},
		check:  func(t *testing.T, _ *longhorn.BackupVolume, _ error) {}, // the label: below
	}, {
		name:   "one deleted after the target lost it (labelled) is released, deleting nothing",
		target: []string{"other/b-1"},
		bv: &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer},
			Labels: map[string]string{types.LabelDeleteCustomResourceOnly: "true"}, DeletionTimestamp: &synced}},
		writes: []string{"update backupvolumes vol"},
		check: func(t *testing.T, bv *longhorn.BackupVolume, err error) {
			if err != nil || len(bv.Finalizers) != 0 {
				t.Errorf("the BackupVolume: %+v, %v; want it released", bv, err)
			}
		},
	}, {
		name:   "a refresh asked for is answered by a sync time, though nothing changed",
		target: []string{"vol/b-1"},
		bv: &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer},
			Labels: map[string]string{types.LabelBackupTarget: "default", types.LabelBackupVolume: "vol"}},
			Spec:   longhorn.BackupVolumeSpec{SyncRequestedAt: metav1.NewTime(synced.Add(time.Hour)), BackupTargetName: "default", VolumeName: "vol"},
			Status: longhorn.BackupVolumeStatus{LastSyncedAt: synced}},
		writes: []string{"create backups", "update backups/status b-1", "update backupvolumes/status vol"},
		check: func(t *testing.T, bv *longhorn.BackupVolume, err error) {
			if err != nil || syncRequested(bv) {
				t.Errorf("the BackupVolume: %+v, %v; want the request answered", bv.Status, err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.target, tc.bv)
			f.lh.ClearActions()
			if _, err := f.c.sync(context.Background(), f.c.refreshKey("vol")); err != nil {
				t.Fatal(err)
			}
			if got := lhWrites(f.lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			for _, a := range f.lh.Actions() {
				u, ok := a.(k8stesting.UpdateAction)
				if !ok || a.GetSubresource() != "" {
					continue
				}
				if bv, ok := u.GetObject().(*longhorn.BackupVolume); ok && tc.labelled && bv.Labels[types.LabelDeleteCustomResourceOnly] != "true" {
					t.Errorf("forgotten without the label: %+v", bv.ObjectMeta)
				}
			}
			bv, err := f.lh.LonghornV1beta2().BackupVolumes("ns").Get(context.Background(), "vol", metav1.GetOptions{})
			tc.check(t, bv, err)
		})
	}
}

// A backup volume gone from the target is removed with the Backup objects
// the target held, but not with what its engines report: a backup that
// failed as the volume left the target (its end is what brought the
// refresh) shows its error, one kept from before is left as it is.
func TestABackupVolumeGoneFromTheTargetKeepsWhatEnginesReport(t *testing.T) {
	now := metav1.Now()
	gone := &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer},
		DeletionTimestamp: &now, Labels: map[string]string{types.LabelDeleteCustomResourceOnly: "true"}}}
	e := engineWith(map[string]longhorn.EngineBackupStatus{
		"b-failed": {State: "Error", SnapshotName: "s", Error: "mkdir /x: not a directory"},
		"b-kept":   {State: "Error", SnapshotName: "s", Error: "earlier"},
	})
	kept := syncBackup("vol", "b-kept", func(b *longhorn.Backup) {
		b.Status.State, b.Status.Error, b.Status.SnapshotName, b.Status.OwnerID = longhorn.BackupStateError, "earlier", "s", "node-1"
	})
	f := newFixture(t, nil, gone, e, syncBackup("vol", "b-listed"), kept)
	f.lh.ClearActions()
	if _, err := f.c.sync(context.Background(), f.c.refreshKey("vol")); err != nil {
		t.Fatal(err)
	}
	want := []string{"update backups b-listed", "delete backups b-listed", "update backupvolumes vol", "create backups", "update backups/status b-failed"}
	if got := lhWrites(f.lh.Actions()); !slices.Equal(got, want) {
		t.Errorf("writes %v, want %v", got, want)
	}
	b, err := f.lh.LonghornV1beta2().Backups("ns").Get(context.Background(), "b-failed", metav1.GetOptions{})
	if err != nil || b.Status.State != longhorn.BackupStateError || b.Status.Error != "mkdir /x: not a directory" {
		t.Fatalf("the failed backup's object: %+v, %v", b, err)
	}
}
