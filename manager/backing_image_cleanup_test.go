package manager

import (
	"reflect"
	"strings"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func files(states map[string]longhorn.BackingImageState) map[string]*longhorn.BackingImageDiskFileStatus {
	out := map[string]*longhorn.BackingImageDiskFileStatus{}
	for disk, st := range states {
		out[disk] = &longhorn.BackingImageDiskFileStatus{State: st}
	}
	return out
}

func TestDecideBackingImageCleanup(t *testing.T) {
	const ready, failed, pending = longhorn.BackingImageStateReady, longhorn.BackingImageStateFailed, longhorn.BackingImageStatePending
	three := map[string]string{"a": "", "b": "", "c": ""}
	for _, tc := range []struct {
		name    string
		in      backingImageCleanup
		keep    []string
		unknown bool
		refusal string
	}{
		{name: "an unused ready copy goes when another ready copy stays",
			in:   backingImageCleanup{Disks: three, MinCopies: 1, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": ready, "c": ready}), Requested: []string{"b"}},
			keep: []string{"a", "c"}},
		{name: "several disks at once",
			in:   backingImageCleanup{Disks: three, MinCopies: 1, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": ready, "c": ready}), Requested: []string{"b", "c"}},
			keep: []string{"a"}},
		{name: "a disk named twice counts once",
			in:   backingImageCleanup{Disks: three, MinCopies: 2, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": ready, "c": ready}), Requested: []string{"c", "c"}},
			keep: []string{"a", "b"}},
		{name: "a disk the image does not name is unknown",
			in:      backingImageCleanup{Disks: three, Files: files(nil), Requested: []string{"z"}},
			unknown: true, refusal: "disks[0]: disk z holds no file of this backing image (its disks are a, b, c)"},
		{name: "an empty UUID is refused",
			in:      backingImageCleanup{Disks: three, Requested: []string{"a", ""}},
			unknown: true, refusal: "disks[1]: empty disk UUID"},
		{name: "an empty request is refused",
			in:      backingImageCleanup{Disks: three},
			unknown: true, refusal: "disks: name at least one disk UUID"},
		{name: "a disk whose file a replica uses stays, naming the replicas",
			in: backingImageCleanup{Disks: three, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": ready, "c": ready}),
				InUse: map[string][]string{"b": {"vol-r-2", "vol-r-1"}}, Requested: []string{"b"}},
			refusal: "disk b: its file is used by replica vol-r-1, vol-r-2"},
		{name: "fewer ready copies than minNumberOfCopies is refused",
			in:      backingImageCleanup{Disks: three, MinCopies: 2, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": ready, "c": failed}), Requested: []string{"a"}},
			refusal: "leave 1 ready copies, fewer than minNumberOfCopies 2"},
		{name: "minNumberOfCopies 0 counts as 1",
			in:      backingImageCleanup{Disks: three, MinCopies: 0, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": failed, "c": pending}), Requested: []string{"a"}},
			refusal: "leave 0 ready copies, fewer than minNumberOfCopies 1"},
		{name: "a failed copy may go even while too few copies are ready",
			in:   backingImageCleanup{Disks: three, MinCopies: 2, Files: files(map[string]longhorn.BackingImageState{"a": ready, "b": failed, "c": pending}), Requested: []string{"b"}},
			keep: []string{"a", "c"}},
		{name: "the disk where the first file is prepared stays",
			in:      backingImageCleanup{Disks: three, Files: files(map[string]longhorn.BackingImageState{"a": longhorn.BackingImageStateInProgress}), PreparingDisk: "a", Requested: []string{"a"}},
			refusal: "disk a: the first file of the image is still being prepared there"},
		{name: "every disk at once is refused",
			in:      backingImageCleanup{Disks: map[string]string{"a": "", "b": ""}, Files: files(map[string]longhorn.BackingImageState{"a": failed, "b": failed}), Requested: []string{"a", "b"}},
			refusal: "would leave it no file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keep, refusal := decideBackingImageCleanup(tc.in)
			if tc.refusal != "" {
				if refusal == nil {
					t.Fatalf("accepted, keeping %v; want refused with %q", keep, tc.refusal)
				}
				if !strings.Contains(refusal.message, tc.refusal) || refusal.unknown != tc.unknown {
					t.Fatalf("refused with %q (unknown %v), want %q (unknown %v)", refusal.message, refusal.unknown, tc.refusal, tc.unknown)
				}
				return
			}
			if refusal != nil {
				t.Fatalf("refused: %s", refusal.message)
			}
			want := map[string]string{}
			for _, d := range tc.keep {
				want[d] = ""
			}
			if !reflect.DeepEqual(keep, want) {
				t.Fatalf("keeps %v, want %v", keep, want)
			}
		})
	}
}
