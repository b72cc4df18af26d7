package backingimage

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestBackingImageStatus(t *testing.T) {
	sumA, sumB := strings.Repeat("a", 128), strings.Repeat("b", 128)
	image := func(checksum string, disks ...string) *longhorn.BackingImage {
		bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"},
			Spec: longhorn.BackingImageSpec{Checksum: checksum, Disks: map[string]string{}}, Status: longhorn.BackingImageStatus{UUID: "u1"}}
		for _, d := range disks {
			bi.Spec.Disks[d] = ""
		}
		return bi
	}
	manager := func(disk string, state longhorn.BackingImageManagerState, files ...longhorn.BackingImageFileInfo) *longhorn.BackingImageManager {
		bim := &longhorn.BackingImageManager{ObjectMeta: metav1.ObjectMeta{Name: "bim-" + disk}, Spec: longhorn.BackingImageManagerSpec{DiskUUID: disk},
			Status: longhorn.BackingImageManagerStatus{CurrentState: state, BackingImageFileMap: map[string]longhorn.BackingImageFileInfo{}}}
		for _, f := range files {
			bim.Status.BackingImageFileMap[f.Name] = f
		}
		return bim
	}
	ready := func(sum string) longhorn.BackingImageFileInfo {
		return longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: longhorn.BackingImageStateReady, Size: 10, VirtualSize: 64, Progress: 100, CurrentChecksum: sum}
	}
	dataSource := func(disk string, state longhorn.BackingImageState, sum, msg string, transferred bool) *longhorn.BackingImageDataSource {
		return &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", DiskUUID: disk, FileTransferred: transferred},
			Status: longhorn.BackingImageDataSourceStatus{CurrentState: state, Checksum: sum, Size: 10, Message: msg}}
	}
	cases := []struct {
		name      string
		view      backingImageView
		want      map[string]longhorn.BackingImageState
		wantInMsg map[string]string
		wantSum   string
		// wantVirtualSize is the disk's size the image's status shows.
		wantVirtualSize int64
	}{
		{
			name: "the data source's state shows on its disk until the file is transferred",
			view: backingImageView{image: image("", "d1", "d2"), dataSource: dataSource("d1", longhorn.BackingImageStateInProgress, "", "", false),
				managers: map[string]*longhorn.BackingImageManager{}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateInProgress, "d2": longhorn.BackingImageStatePending},
		},
		{
			name: "a failed download shows on its disk even when its manager lists the file waiting for it",
			view: backingImageView{image: image("", "d1"), dataSource: dataSource("d1", longhorn.BackingImageStateFailed, "", "dial tcp 127.0.0.1:1: connection refused", false),
				managers: map[string]*longhorn.BackingImageManager{"d1": manager("d1", longhorn.BackingImageManagerStateRunning,
					longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: longhorn.BackingImageStateStarting})}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateFailed}, wantInMsg: map[string]string{"d1": "127.0.0.1:1"},
		},
		{
			name: "once the data source is ready for transfer, the manager's fetch shows",
			view: backingImageView{image: image("", "d1"), dataSource: dataSource("d1", longhorn.BackingImageStateReadyForTransfer, sumA, "", false),
				managers: map[string]*longhorn.BackingImageManager{"d1": manager("d1", longhorn.BackingImageManagerStateRunning,
					longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: longhorn.BackingImageStateInProgress, Progress: 40})}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateInProgress},
		},
		{
			name: "a failed download fails its disk with the reason",
			view: backingImageView{image: image(sumA, "d1"), dataSource: dataSource("d1", longhorn.BackingImageStateFailed, "", "checksum mismatch", false)},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateFailed}, wantInMsg: map[string]string{"d1": "checksum mismatch"},
		},
		{
			name: "a ready file with the expected checksum is ready and tells the image's virtual size",
			view: backingImageView{image: image(sumA, "d1"), managers: map[string]*longhorn.BackingImageManager{
				"d1": manager("d1", longhorn.BackingImageManagerStateRunning, ready(sumA))}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateReady}, wantSum: sumA, wantVirtualSize: 64,
		},
		{
			name: "a file that hashes differently from spec.checksum is failed, never ready",
			view: backingImageView{image: image(sumA, "d1"), managers: map[string]*longhorn.BackingImageManager{
				"d1": manager("d1", longhorn.BackingImageManagerStateRunning, ready(sumB))}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateFailed}, wantInMsg: map[string]string{"d1": "checksum mismatch"},
		},
		{
			name: "with no spec.checksum the data source's checksum is the reference for every copy",
			view: backingImageView{image: image("", "d1", "d2"), dataSource: dataSource("d1", longhorn.BackingImageStateReadyForTransfer, sumA, "", true),
				managers: map[string]*longhorn.BackingImageManager{
					"d1": manager("d1", longhorn.BackingImageManagerStateRunning, ready(sumA)),
					"d2": manager("d2", longhorn.BackingImageManagerStateRunning, ready(sumB))}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateReady, "d2": longhorn.BackingImageStateFailed}, wantVirtualSize: 64,
		},
		{
			name: "a file of an older image of the same name is not this image's",
			view: backingImageView{image: image("", "d1"), managers: map[string]*longhorn.BackingImageManager{
				"d1": manager("d1", longhorn.BackingImageManagerStateRunning, longhorn.BackingImageFileInfo{Name: "img", UUID: "old", State: longhorn.BackingImageStateReady})}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStatePending},
		},
		{
			name: "a failed file being downloaded again shows the new data source on its disk, and stays failed elsewhere",
			view: backingImageView{image: image(sumA, "d1", "d2"), dataSource: dataSource("d1", longhorn.BackingImageStateInProgress, "", "", false),
				managers: map[string]*longhorn.BackingImageManager{
					"d1": manager("d1", longhorn.BackingImageManagerStateRunning, longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: longhorn.BackingImageStateFailed, Message: "corrupt"}),
					"d2": manager("d2", longhorn.BackingImageManagerStateRunning, longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: longhorn.BackingImageStateFailed, Message: "corrupt"})}},
			want:      map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateInProgress, "d2": longhorn.BackingImageStateFailed},
			wantInMsg: map[string]string{"d2": "corrupt"},
		},
		{
			name: "a disk whose manager is in error is unknown",
			view: backingImageView{image: image("", "d1"), managers: map[string]*longhorn.BackingImageManager{
				"d1": manager("d1", longhorn.BackingImageManagerStateError)}},
			want: map[string]longhorn.BackingImageState{"d1": longhorn.BackingImageStateUnknown},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := backingImageStatus(c.view, "now")
			if len(got.DiskFileStatusMap) != len(c.want) {
				t.Fatalf("got %d disks, want %d", len(got.DiskFileStatusMap), len(c.want))
			}
			for disk, want := range c.want {
				f := got.DiskFileStatusMap[disk]
				if f == nil || f.State != want {
					t.Fatalf("disk %s: got %+v, want state %s", disk, f, want)
				}
				if m := c.wantInMsg[disk]; m != "" && !strings.Contains(f.Message, m) {
					t.Fatalf("disk %s: message %q does not say %q", disk, f.Message, m)
				}
			}
			if c.wantSum != "" && got.Checksum != c.wantSum {
				t.Fatalf("checksum %s, want %s", got.Checksum, c.wantSum)
			}
			if got.VirtualSize != c.wantVirtualSize {
				t.Fatalf("virtual size %d, want %d", got.VirtualSize, c.wantVirtualSize)
			}
		})
	}
}

func TestBackingImageStatusKeepsTheTransitionTimeOfAnUnchangedState(t *testing.T) {
	bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Spec: longhorn.BackingImageSpec{Disks: map[string]string{"d1": ""}},
		Status: longhorn.BackingImageStatus{UUID: "u1", DiskFileStatusMap: map[string]*longhorn.BackingImageDiskFileStatus{
			"d1": {State: longhorn.BackingImageStatePending, LastStateTransitionTime: "then"}}}}
	got := backingImageStatus(backingImageView{image: bi}, "now")
	if ts := got.DiskFileStatusMap["d1"].LastStateTransitionTime; ts != "then" {
		t.Fatalf("transition time %q, want the old one", ts)
	}
}
