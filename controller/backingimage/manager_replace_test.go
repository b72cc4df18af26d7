package backingimage

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestManagerNamesLetTwoImagesShareADisk(t *testing.T) {
	a, b := managerName("longhorn-manager:v1", "disk-1"), managerName("longhorn-manager:v2", "disk-1")
	if a == b {
		t.Fatalf("managers of two images of one disk share the name %s", a)
	}
	if a != managerName("longhorn-manager:v1", "disk-1") {
		t.Fatal("the name of a disk's manager of one image is not stable")
	}
}

func TestManagerReplacement(t *testing.T) {
	bim := func(name, image, disk string, state longhorn.BackingImageManagerState, spec map[string]string, files ...longhorn.BackingImageFileInfo) *longhorn.BackingImageManager {
		m := &longhorn.BackingImageManager{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   longhorn.BackingImageManagerSpec{Image: image, DiskUUID: disk, BackingImages: spec},
			Status: longhorn.BackingImageManagerStatus{CurrentState: state, BackingImageFileMap: map[string]longhorn.BackingImageFileInfo{}}}
		for _, f := range files {
			m.Status.BackingImageFileMap[f.Name] = f
		}
		return m
	}
	file := func(name, uuid string, state longhorn.BackingImageState) longhorn.BackingImageFileInfo {
		return longhorn.BackingImageFileInfo{Name: name, UUID: uuid, State: state}
	}
	running := longhorn.BackingImageManagerStateRunning
	ready, inProgress, unknown := longhorn.BackingImageStateReady, longhorn.BackingImageStateInProgress, longhorn.BackingImageStateUnknown
	both := map[string]string{"a": "ua", "b": "ub"}

	old := bim("bim-d1", "v1", "d1", running, both, file("a", "ua", ready), file("b", "ub", ready))
	other := bim("bim-v1-d2", "v1", "d2", running, both)
	half := bim("bim-v2-d1", "v2", "d1", running, both, file("a", "ua", ready), file("b", "ub", unknown))
	all := bim("bim-v2-d1", "v2", "d1", running, both, file("a", "ua", ready), file("b", "ub", ready))

	t.Run("a manager of the default image is never replaced", func(t *testing.T) {
		if r := replacementOf(all, "v2", []*longhorn.BackingImageManager{old, all}); r != nil {
			t.Fatalf("replaced by %s", r.Name)
		}
	})
	t.Run("an old manager is replaced by the default image's manager of its disk only", func(t *testing.T) {
		if r := replacementOf(old, "v2", []*longhorn.BackingImageManager{old, other}); r != nil {
			t.Fatalf("replaced by %s, of another disk", r.Name)
		}
		if r := replacementOf(old, "v2", []*longhorn.BackingImageManager{old, half}); r != half {
			t.Fatalf("replacement %v, want %s", r, half.Name)
		}
	})
	t.Run("the old manager stays until every one of its files is ready in the new one", func(t *testing.T) {
		if got := filesNotTakenOver(old, half); !reflect.DeepEqual(got, []string{"b"}) {
			t.Fatalf("not taken over: %v, want [b]", got)
		}
		if got := filesNotTakenOver(old, all); len(got) != 0 {
			t.Fatalf("not taken over: %v, want none", got)
		}
	})
	t.Run("the new manager keeps every file of the old one", func(t *testing.T) {
		n := newManager("v2", "node-1", "d1", "/disk", []*longhorn.BackingImageManager{old})
		if !reflect.DeepEqual(n.Spec.BackingImages, both) || n.Name != managerName("v2", "d1") || n.Spec.Image != "v2" {
			t.Fatalf("new manager %s of image %s keeps %v", n.Name, n.Spec.Image, n.Spec.BackingImages)
		}
	})
	t.Run("no replacement starts while the old manager is copying a file", func(t *testing.T) {
		busy := bim("bim-d1", "v1", "d1", running, both, file("a", "ua", inProgress))
		if got := transferringManager([]*longhorn.BackingImageManager{old, busy}); got != busy {
			t.Fatalf("transferring: %v", got)
		}
		if got := transferringManager([]*longhorn.BackingImageManager{old}); got != nil {
			t.Fatalf("transferring: %s", got.Name)
		}
	})
	t.Run("the status shows the old manager's ready file until the new one's is ready", func(t *testing.T) {
		bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: longhorn.BackingImageStatus{UUID: "ub"}}
		if got := shownManager(bi, half, []*longhorn.BackingImageManager{old}); got != old {
			t.Fatalf("shown: %s", got.Name)
		}
		if got := shownManager(bi, all, []*longhorn.BackingImageManager{old}); got != all {
			t.Fatalf("shown: %s", got.Name)
		}
	})
	t.Run("a file a sibling manager of the disk wants is never deleted", func(t *testing.T) {
		if !wantedBySibling(half, []*longhorn.BackingImageManager{old, half}, "b", "ub") {
			t.Fatal("the old manager's file is not seen as wanted")
		}
		if wantedBySibling(half, []*longhorn.BackingImageManager{old, half}, "b", "another-uuid") {
			t.Fatal("a file of another uuid is seen as wanted")
		}
		if wantedBySibling(half, []*longhorn.BackingImageManager{other, half}, "b", "ub") {
			t.Fatal("a manager of another disk makes the file wanted")
		}
	})
}
