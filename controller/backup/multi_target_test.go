package backup

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// addTarget makes a second file:// target, BackupTarget name owned by
// this node, holding the backups given as volume/name; it returns the
// target's root.
func (f *fixture) addTarget(t *testing.T, name string, backups ...string) string {
	t.Helper()
	root := t.TempDir()
	store, err := backupstore.Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	for _, vb := range backups {
		vol, b, _ := strings.Cut(vb, "/")
		if _, _, err := store.Backup(backupstore.BackupRequest{Name: b, Volume: vol, Snapshot: "s-" + b, Source: bytes.NewReader([]byte(vb))}); err != nil {
			t.Fatal(err)
		}
	}
	f.addTargetAt(t, name, "file://"+root)
	return root
}

// addTargetAt makes a BackupTarget name at url, owned by this node, as
// kubectl would: no API check of its URL.
func (f *fixture) addTargetAt(t *testing.T, name, url string) {
	t.Helper()
	bt := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:   longhorn.BackupTargetSpec{BackupTargetURL: url, PollInterval: metav1.Duration{Duration: 300e9}},
		Status: longhorn.BackupTargetStatus{OwnerID: "node-1"}}
	if _, err := f.lh.LonghornV1beta2().BackupTargets("ns").Create(context.Background(), bt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(t, bt)
}

func holds(root, volume, backup string) bool {
	_, err := os.Stat(filepath.Join(root, "backupstore", "volumes", volume, "backups", "backup_"+backup+".cfg"))
	return err == nil
}

func (f *fixture) pollOf(t *testing.T, target string) {
	t.Helper()
	if _, err := f.c.sync(context.Background(), f.c.pollKey(target)); err != nil {
		t.Fatalf("poll of %s: %v", target, err)
	}
	f.cacheWrites(t)
}

// TestSeveralTargets: each target is mirrored into objects that name it,
// apart from the others'; what happens to one target (emptied, deleted)
// never forgets or deletes another's backups, and a user's delete
// deletes from the backup's own target only.
func TestSeveralTargets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, []string{"vol/b-home"})
	offsite := f.addTarget(t, "offsite", "vol/b-away")
	f.pollOf(t, datastore.DefaultBackupTargetName)
	f.pollOf(t, "offsite")

	lh := f.lh.LonghornV1beta2()
	away, err := lh.Backups("ns").Get(ctx, "b-away", metav1.GetOptions{})
	if err != nil || away.Labels[types.LabelBackupTarget] != "offsite" || away.Status.BackupTargetName != "offsite" || away.Status.State != longhorn.BackupStateCompleted {
		t.Fatalf("offsite's backup object: %+v, %v", away, err)
	}
	home, err := lh.Backups("ns").Get(ctx, "b-home", metav1.GetOptions{})
	if err != nil || home.Labels[types.LabelBackupTarget] != "default" || home.Status.BackupTargetName != "default" {
		t.Fatalf("default's backup object: %+v, %v", home, err)
	}
	awayBV := datastore.BackupVolumeObjectName("vol", "offsite")
	if awayBV == "vol" || awayBV[:4] != "vol-" || len(awayBV) != len("vol-")+8 {
		t.Fatalf("offsite's backup volume is named %q, want vol-<8 hex>", awayBV)
	}
	bv, err := lh.BackupVolumes("ns").Get(ctx, awayBV, metav1.GetOptions{})
	if err != nil || bv.Spec.BackupTargetName != "offsite" || bv.Spec.VolumeName != "vol" || bv.Status.LastBackupName != "b-away" {
		t.Fatalf("offsite's BackupVolume: %+v, %v", bv, err)
	}
	if bv, err := lh.BackupVolumes("ns").Get(ctx, "vol", metav1.GetOptions{}); err != nil || bv.Spec.BackupTargetName != "default" || bv.Status.LastBackupName != "b-home" {
		t.Fatalf("default's BackupVolume: %+v, %v", bv, err)
	}

	// default emptied: its poll forgets its objects, not offsite's.
	if err := os.RemoveAll(filepath.Join(f.root, "backupstore")); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(301e9)
	f.lh.ClearActions()
	f.pollOf(t, datastore.DefaultBackupTargetName)
	want := []string{"update backups b-home", "delete backups b-home", "update backupvolumes vol", "delete backupvolumes vol"}
	if got := lhWrites(f.lh.Actions()); !slices.Equal(got, want) {
		t.Fatalf("default's poll wrote %v, want %v", got, want)
	}

	// A user deletes offsite's backup: gone from offsite only.
	now := metav1.Now()
	away.DeletionTimestamp = &now
	f.cache(t, away)
	if _, err := f.c.sync(ctx, f.c.refreshKeyIn("offsite", "vol")); err != nil {
		t.Fatal(err)
	}
	if holds(offsite, "vol", "b-away") {
		t.Error("the deleted backup is still in offsite")
	}
}

// TestDeletedTargetDeletesNothing: a BackupTarget deleted takes its
// objects with it, labelled delete-custom-resource-only first, and
// deletes nothing from its store.
func TestDeletedTargetDeletesNothing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	offsite := f.addTarget(t, "offsite", "vol/b-away")
	f.pollOf(t, "offsite")
	if err := f.lh.LonghornV1beta2().BackupTargets("ns").Delete(ctx, "offsite", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Longhorn.Longhorn().V1beta2().BackupTargets().Informer().GetIndexer().Delete(&longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite", Namespace: "ns"}}); err != nil {
		t.Fatal(err)
	}
	f.lh.ClearActions()
	f.pollOf(t, "offsite")
	awayBV := datastore.BackupVolumeObjectName("vol", "offsite")
	want := []string{"update backups b-away", "delete backups b-away", "update backupvolumes " + awayBV, "delete backupvolumes " + awayBV}
	if got := lhWrites(f.lh.Actions()); !slices.Equal(got, want) {
		t.Fatalf("wrote %v, want %v", got, want)
	}
	if !holds(offsite, "vol", "b-away") {
		t.Error("a deleted BackupTarget's backup was deleted from its store")
	}
}

// A backup that finished refreshes its volume in its own target only,
// which the engine's URL for it names.
func TestFinishedBackupRefreshesItsOwnTarget(t *testing.T) {
	f := newFixture(t, nil)
	offsite := f.addTarget(t, "offsite")
	for f.c.Queue.Len() > 0 {
		k, _ := f.c.Queue.Get()
		f.c.Queue.Done(k)
	}
	url := "file://" + offsite + "?backup=b-1&volume=vol"
	engine := func(state string) *longhorn.Engine {
		return &longhorn.Engine{Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}}, Status: longhorn.EngineStatus{
			BackupStatus: map[string]*longhorn.EngineBackupStatus{"b-1": {State: state, BackupURL: url, SnapshotName: "s1"}}}}
	}
	f.c.enqueueEngine(engine("InProgress"), engine("Completed"))
	if f.c.Queue.Len() != 1 {
		t.Fatalf("%d keys queued, want 1", f.c.Queue.Len())
	}
	if k, _ := f.c.Queue.Get(); k != f.c.refreshKeyIn("offsite", "vol") {
		t.Errorf("queued %v, want offsite's refresh of vol", k)
	}
}

// Objects made before there were several targets name none: they are
// default's, keep their names, and default's next poll labels them, so
// an upgraded cluster loses and duplicates nothing.
func TestObjectsFromBeforeTargetsAreDefaults(t *testing.T) {
	ctx := context.Background()
	legacy := &longhorn.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: "b-1", Namespace: "ns", Labels: map[string]string{types.LabelBackupVolume: "vol"}, Finalizers: []string{types.LonghornFinalizer}},
		Status:     longhorn.BackupStatus{State: longhorn.BackupStateCompleted, VolumeName: "vol"},
	}
	legacyBV := &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: "ns", Finalizers: []string{types.LonghornFinalizer}}}
	f := newFixture(t, []string{"vol/b-1"}, legacy, legacyBV)
	f.addTarget(t, "offsite")
	f.pollOf(t, "offsite")
	f.pollOf(t, datastore.DefaultBackupTargetName)
	lh := f.lh.LonghornV1beta2()
	b, err := lh.Backups("ns").Get(ctx, "b-1", metav1.GetOptions{})
	if err != nil || b.Labels[types.LabelBackupTarget] != "default" || b.Status.BackupTargetName != "default" {
		t.Errorf("the Backup: %+v, %v", b, err)
	}
	bvs, err := lh.BackupVolumes("ns").List(ctx, metav1.ListOptions{})
	if err != nil || len(bvs.Items) != 1 || bvs.Items[0].Name != "vol" || bvs.Items[0].Spec.BackupTargetName != "default" || bvs.Items[0].Spec.VolumeName != "vol" {
		t.Errorf("the BackupVolumes: %+v, %v; want vol alone, default's", bvs, err)
	}
	backups, err := lh.Backups("ns").List(ctx, metav1.ListOptions{})
	if err != nil || len(backups.Items) != 1 {
		t.Errorf("the Backups: %+v, %v; want b-1 alone", backups, err)
	}
}

// A backup whose target was deleted while it ran is no target's: it is
// mirrored into no other target's objects, and a refresh of default does
// not mark it interrupted there.
func TestBackupToADeletedTargetIsNoOthers(t *testing.T) {
	f := newFixture(t, nil)
	gone := "file://" + t.TempDir()
	e := &longhorn.Engine{ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0", Namespace: "ns"}, Spec: longhorn.EngineSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}},
		Status: longhorn.EngineStatus{BackupStatus: map[string]*longhorn.EngineBackupStatus{
			"b-1": {State: "InProgress", BackupURL: gone + "?backup=b-1&volume=vol", SnapshotName: "s1"}}}}
	if _, err := f.lh.LonghornV1beta2().Engines("ns").Create(context.Background(), e, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.cache(t, e)
	f.lh.ClearActions()
	if err := f.c.syncMirror(context.Background(), "vol"); err != nil {
		t.Fatal(err)
	}
	f.pollOf(t, datastore.DefaultBackupTargetName)
	if got := lhWrites(f.lh.Actions()); len(got) != 0 {
		t.Errorf("wrote %v for a backup to a deleted target", got)
	}
}

// A volume named as another's BackupVolume in another target
// (vol-<8 hex>, the name offsite's BackupVolume of vol would have) keeps
// its BackupVolume in default, and offsite's of vol is made under its
// second name: each volume has its own, found by volume and target.
func TestAVolumeNamedAsAnothersBackupVolumeGetsItsOwn(t *testing.T) {
	ctx := context.Background()
	taken := datastore.BackupVolumeObjectName("vol", "offsite")
	f := newFixture(t, []string{taken + "/b-home"})
	f.addTarget(t, "offsite", "vol/b-away")
	f.pollOf(t, datastore.DefaultBackupTargetName)
	f.pollOf(t, "offsite")
	lh := f.lh.LonghornV1beta2()
	home, err := lh.BackupVolumes("ns").Get(ctx, taken, metav1.GetOptions{})
	if err != nil || home.Spec.BackupTargetName != "default" || home.Spec.VolumeName != taken || home.Status.LastBackupName != "b-home" {
		t.Fatalf("default's BackupVolume of %s: %+v, %v", taken, home, err)
	}
	second := datastore.BackupVolumeObjectNames("vol", "offsite")[1]
	away, err := lh.BackupVolumes("ns").Get(ctx, second, metav1.GetOptions{})
	if err != nil || away.Spec.BackupTargetName != "offsite" || away.Spec.VolumeName != "vol" || away.Status.LastBackupName != "b-away" {
		t.Fatalf("offsite's BackupVolume of vol, %s: %+v, %v", second, away, err)
	}
	if found, err := f.c.ds.FindBackupVolumeRO("offsite", "vol"); err != nil || found == nil || found.Name != second {
		t.Errorf("found %v, %v for vol in offsite; want %s", found, err, second)
	}
}
