package snapshot

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestDecide is the snapshot controller's decision table: what one sync
// does for each state of the object, its engine snapshot and its engine.
func TestDecide(t *testing.T) {
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}}
	deleted := metav1.Now()
	snap := func(mutate ...func(*longhorn.Snapshot)) *longhorn.Snapshot {
		s := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s1"}, Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true}}
		for _, m := range mutate {
			m(s)
		}
		return s
	}
	beingDeleted := func(s *longhorn.Snapshot) { s.DeletionTimestamp = &deleted }
	created := func(s *longhorn.Snapshot) { s.Status.CreationTime = "2026-11-26T10:00:00Z" }
	adopted := func(s *longhorn.Snapshot) { s.Spec.CreateSnapshot = false }
	shownRemoved := func(s *longhorn.Snapshot) { s.Status.MarkRemoved = true }
	entry := &longhorn.SnapshotInfo{Name: "s1", Created: "2026-11-26T10:00:00Z"}
	removed := &longhorn.SnapshotInfo{Name: "s1", Removed: true}

	for _, tc := range []struct {
		name string
		view view
		want action
		says string // in the plan's message
	}{
		// A deletion.
		{"deleted, the running engine has no such snapshot: the object goes", view{snap: snap(beingDeleted, created), info: nil, running: true, hasEngine: true, listed: true}, releaseFinalizer, ""},
		// A mirror lags: the snapshot may have been taken since.
		{"deleted, the mirror of a running engine elsewhere has none: waits for the engine", view{snap: snap(beingDeleted, created), running: true}, reportError, "waits for volume vol to be attached"},
		{"deleted, the engine here cannot list its snapshots, the mirror has none: waits", view{snap: snap(beingDeleted, created), running: true, hasEngine: true}, reportError, "cannot list its snapshots"},
		{"deleted while detached: waits for the engine, saying why", view{snap: snap(beingDeleted, created), info: entry}, reportError, "waits for volume vol to be attached"},
		{"deleted, the engine runs elsewhere (the mirror has it): waits", view{snap: snap(beingDeleted, created), info: entry, running: true}, reportError, "waits for volume vol"},
		{"deleted, the engine here has it: delete it there", view{snap: snap(beingDeleted, created), info: entry, running: true, hasEngine: true}, deleteInEngine, ""},
		{"deleted, marked removed in the engine: status, then purge", view{snap: snap(beingDeleted, created), info: removed, running: true, hasEngine: true}, markRemoved, ""},
		// A creation.
		{"new, the engine runs here: create it", view{snap: snap(), running: true, hasEngine: true}, createInEngine, ""},
		{"new, the volume detached: nothing yet", view{snap: snap()}, nothing, ""},
		{"new, the engine runs elsewhere: nothing here", view{snap: snap(), running: true}, nothing, ""},
		{"created: its status from the engine", view{snap: snap(created), info: entry, running: true, hasEngine: true}, writeStatus, ""},
		{"created, read from the mirror while detached: status", view{snap: snap(created), info: entry}, writeStatus, ""},
		// Gone from the engine.
		{"shown removed, now purged: the object goes", view{snap: snap(created, shownRemoved), running: true}, deleteObject, ""},
		{"purged here before its removal was ever shown: the object goes", view{snap: snap(created), running: true, hasEngine: true, purged: true}, deleteObject, ""},
		{"adopted and purged before its first status: the object goes", view{snap: snap(adopted), running: true, hasEngine: true, purged: true}, deleteObject, ""},
		{"gone from a running engine, never deleted: an error, the object kept", view{snap: snap(created), running: true, hasEngine: true, listed: true}, reportError, "gone from the engine"},
		{"adopted, no such snapshot: an error naming the volume", view{snap: snap(adopted), running: true, hasEngine: true, listed: true}, reportError, "volume vol has no snapshot of this name"},
		{"no entry in the mirror of an engine elsewhere: nothing (it may lag)", view{snap: snap(created), running: true}, nothing, ""},
		{"created, detached, no entry in the mirror: nothing (no data is judged lost while detached)", view{snap: snap(created)}, nothing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.view.volume = vol
			got := decide(tc.view)
			if got.action != tc.want || !strings.Contains(got.message, tc.says) {
				t.Errorf("decide = %v %q, want %v saying %q", got.action, got.message, tc.want, tc.says)
			}
		})
	}
}

func TestRemovedStatusSaysWhyThePurgeWaits(t *testing.T) {
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol"}, Spec: longhorn.VolumeSpec{Size: 4 << 20}}
	st := removedStatus(&longhorn.SnapshotInfo{Name: "s1", Children: map[string]bool{"b": true, "a": true}, Size: "4096"}, vol, "node-1")
	if !st.MarkRemoved || st.ReadyToUse || st.Size != 4096 || st.OwnerID != "node-1" || !strings.Contains(st.Error, "2 children (a, b)") {
		t.Errorf("status %+v", st)
	}
	if st := removedStatus(&longhorn.SnapshotInfo{Name: "s1", Children: map[string]bool{"a": true}}, vol, "node-1"); st.Error != "" {
		t.Errorf("one child: error %q", st.Error)
	}
}
