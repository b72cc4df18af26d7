package backup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

// syncBackup is a Backup object as the controller makes it, of volume's
// backup name, Completed; its status has yet to be filled from the target
// (the sync's status write).
func syncBackup(volume, name string, mutate ...func(*longhorn.Backup)) *longhorn.Backup {
	b := &longhorn.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{types.LabelBackupVolume: volume, types.LabelBackupTarget: "default"}, Finalizers: []string{types.LonghornFinalizer}},
		Status:     longhorn.BackupStatus{State: longhorn.BackupStateCompleted, VolumeName: volume, BackupTargetName: "default"},
	}
	for _, m := range mutate {
		m(b)
	}
	return b
}

func deleted(b *longhorn.Backup) {
	now := metav1.Now()
	b.DeletionTimestamp = &now
}

func forgotten(b *longhorn.Backup) { b.Labels[types.LabelDeleteCustomResourceOnly] = "true" }

// lhWrites are the create, update and delete actions a sync made, as
// "verb resource[/subresource] name", but those of BackupTargets (a
// poll's result in the target's status: targetWrites).
func lhWrites(actions []k8stesting.Action) []string {
	var out []string
	for _, w := range allWrites(actions) {
		if !strings.Contains(w, " backuptargets") {
			out = append(out, w)
		}
	}
	return out
}

// targetWrites are the writes of BackupTargets a sync made.
func targetWrites(actions []k8stesting.Action) []string {
	var out []string
	for _, w := range allWrites(actions) {
		if strings.Contains(w, " backuptargets") {
			out = append(out, w)
		}
	}
	return out
}

func allWrites(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		r := a.GetResource().Resource
		if a.GetSubresource() != "" {
			r += "/" + a.GetSubresource()
		}
		switch a.GetVerb() {
		case "create":
			out = append(out, "create "+r)
		case "update":
			out = append(out, "update "+r+" "+a.(k8stesting.UpdateAction).GetObject().(metav1.Object).GetName())
		case "delete":
			out = append(out, "delete "+r+" "+a.(k8stesting.DeleteAction).GetName())
		}
	}
	return out
}

// TestTargetSync: what one poll of a file:// target writes, and what it
// deletes from the target: only what a user deleted.
func TestTargetSync(t *testing.T) {
	for _, tc := range []struct {
		name string
		// target holds these backups, volume/name.
		target []string
		// prepare changes the target before the sync.
		prepare func(t *testing.T, root string)
		objects []*longhorn.Backup
		writes  []string
		// left are the backup configs, volume/name, the target holds
		// after the sync.
		left  []string
		check func(t *testing.T, lh *lhfake.Clientset)
	}{{
		name:    "a backup gone from the target is forgotten, its object labelled first",
		target:  []string{"vol/b-keep"},
		objects: []*longhorn.Backup{syncBackup("vol", "b-keep"), syncBackup("vol", "b-gone")},
		writes:  []string{"create backupvolumes", "update backups/status b-keep", "update backups b-gone", "delete backups b-gone", "update backupvolumes/status vol"},
		left:    []string{"vol/b-keep"},
	}, {
		name:    "a user's delete deletes the backup from the target",
		target:  []string{"vol/b-1", "vol/b-2"},
		objects: []*longhorn.Backup{syncBackup("vol", "b-1", deleted), syncBackup("vol", "b-2")},
		writes:  []string{"update backups b-1", "create backupvolumes", "update backups/status b-2", "update backupvolumes/status vol"},
		left:    []string{"vol/b-2"},
	}, {
		name:    "a forgotten object's finalizer deletes nothing, even when the backup is back",
		target:  []string{"vol/b-1"},
		objects: []*longhorn.Backup{syncBackup("vol", "b-1", deleted, forgotten)},
		writes:  []string{"update backups b-1", "create backupvolumes", "update backupvolumes/status vol"},
		left:    []string{"vol/b-1"},
	}, {
		name:    "two volumes' backups of one name: the object keeps its volume, the other is said",
		target:  []string{"vol-a/b-same", "vol-b/b-same"},
		objects: []*longhorn.Backup{syncBackup("vol-b", "b-same")},
		writes: []string{"create backupvolumes", "update backupvolumes/status vol-a",
			"create backupvolumes", "update backups/status b-same", "update backupvolumes/status vol-b"},
		left: []string{"vol-a/b-same", "vol-b/b-same"},
		check: func(t *testing.T, lh *lhfake.Clientset) {
			b, err := lh.LonghornV1beta2().Backups("ns").Get(context.Background(), "b-same", metav1.GetOptions{})
			if err != nil || b.Status.VolumeName != "vol-b" || !strings.Contains(b.Status.URL, "volume=vol-b") {
				t.Errorf("the object: %+v, %v; want it to stand for vol-b's backup", b.Status, err)
			}
			bv, err := lh.LonghornV1beta2().BackupVolumes("ns").Get(context.Background(), "vol-a", metav1.GetOptions{})
			if err != nil || !strings.Contains(bv.Status.Messages[BackupVolumeMessageNameTaken], "volume vol-b's backup") {
				t.Errorf("vol-a's messages: %v, %v", bv.Status.Messages, err)
			}
		},
	}, {
		name:   "a volume.cfg gone: the backups stay listed and the BackupVolume says so",
		target: []string{"vol/b-1"},
		prepare: func(t *testing.T, root string) {
			if err := os.Remove(filepath.Join(root, "backupstore", "volumes", "vol", "volume.cfg")); err != nil {
				t.Fatal(err)
			}
		},
		objects: []*longhorn.Backup{syncBackup("vol", "b-1")},
		writes:  []string{"create backupvolumes", "update backups/status b-1", "update backupvolumes/status vol"},
		left:    []string{"vol/b-1"},
		check: func(t *testing.T, lh *lhfake.Clientset) {
			bv, err := lh.LonghornV1beta2().BackupVolumes("ns").Get(context.Background(), "vol", metav1.GetOptions{})
			if err != nil || !strings.Contains(bv.Status.Messages[BackupVolumeMessageRecordMissing], "volume.cfg") || bv.Status.LastBackupName != "b-1" {
				t.Errorf("the BackupVolume: %+v, %v", bv.Status, err)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objects := make([]runtime.Object, 0, len(tc.objects))
			for _, b := range tc.objects {
				objects = append(objects, b)
			}
			f := newFixture(t, tc.target, objects...)
			if tc.prepare != nil {
				tc.prepare(t, f.root)
			}
			c, lh, root := f.c, f.lh, f.root
			lh.ClearActions()

			if _, err := c.sync(context.Background(), c.key()); err != nil {
				t.Fatalf("sync: %v", err)
			}
			if got := lhWrites(lh.Actions()); !slices.Equal(got, tc.writes) {
				t.Errorf("writes %v, want %v", got, tc.writes)
			}
			var left []string
			for _, vb := range append(slices.Clone(tc.target), "vol/b-gone") {
				vol, name, _ := strings.Cut(vb, "/")
				if _, err := os.Stat(filepath.Join(root, "backupstore", "volumes", vol, "backups", "backup_"+name+".cfg")); err == nil {
					left = append(left, vb)
				}
			}
			if !slices.Equal(left, tc.left) {
				t.Errorf("the target holds %v, want %v", left, tc.left)
			}
			if tc.check != nil {
				tc.check(t, lh)
			}
		})
	}
}
