package backingimage

import (
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// The engine's rule for snapshot names.
var snapshotName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

func TestExportSnapshotName(t *testing.T) {
	for _, tc := range []struct {
		name, image, uuid, want string
	}{
		{"named after the image and its UUID", "ubuntu", "0a1b2c3d", "bi-ubuntu-0a1b2c3d"},
		{"a long image name is cut, the UUID kept", strings.Repeat("x", 80), "0a1b2c3d", "bi-" + strings.Repeat("x", 51) + "-0a1b2c3d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := exportSnapshotName(&longhorn.BackingImageDataSource{ObjectMeta: metav1.ObjectMeta{Name: tc.image},
				Spec: longhorn.BackingImageDataSourceSpec{UUID: tc.uuid}})
			if got != tc.want || !snapshotName.MatchString(got) {
				t.Fatalf("got %q (valid: %v), want %q", got, snapshotName.MatchString(got), tc.want)
			}
		})
	}
}

func TestRetryFailedDataSource(t *testing.T) {
	export := &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{SourceType: longhorn.BackingImageDataSourceTypeExportFromVolume}}
	download := &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{SourceType: longhorn.BackingImageDataSourceTypeDownload}}
	failed := &datasource.FileStatus{State: longhorn.BackingImageStateFailed, Message: "volume vol has no engine on this node"}
	for _, tc := range []struct {
		name string
		bids *longhorn.BackingImageDataSource
		last *datasource.FileStatus
		want bool
	}{
		{"an export that failed midway is tried again", export, failed, true},
		{"a cancelled export is not", export, &datasource.FileStatus{State: longhorn.BackingImageStateFailed, Message: datasource.CancelledMessage}, false},
		{"an export whose file has another checksum than expected is not", export, &datasource.FileStatus{State: longhorn.BackingImageStateFailed,
			Message: "export snapshot s of volume v: checksum mismatch: the file hashes to 1, want 2"}, false},
		{"an export in progress is left alone", export, &datasource.FileStatus{State: longhorn.BackingImageStateInProgress}, false},
		{"a failed download is tried again (the source may answer right next time)", download, failed, true},
		{"a download that hashed wrong too", download, &datasource.FileStatus{State: longhorn.BackingImageStateFailed, Message: "checksum mismatch: the file hashes to 1, want 2"}, true},
		{"a cancelled download is not", download, &datasource.FileStatus{State: longhorn.BackingImageStateFailed, Message: datasource.CancelledMessage}, false},
		{"an upload is never (nothing to fetch again)", &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{SourceType: longhorn.BackingImageDataSourceTypeUpload}}, failed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := retryFailed(tc.bids, tc.last); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExportMisplaced(t *testing.T) {
	source := func(sourceType longhorn.BackingImageDataSourceType, node string, state longhorn.BackingImageState, edit ...func(*longhorn.BackingImageDataSource)) *longhorn.BackingImageDataSource {
		bids := &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{SourceType: sourceType, NodeID: node},
			Status: longhorn.BackingImageDataSourceStatus{CurrentState: state}}
		for _, e := range edit {
			e(bids)
		}
		return bids
	}
	export := longhorn.BackingImageDataSourceTypeExportFromVolume
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		bids       *longhorn.BackingImageDataSource
		engineNode string
		want       bool
	}{
		{"waiting on another node than the engine's", source(export, "node-1", longhorn.BackingImageStatePending), "node-2", true},
		{"failed on another node (it refused to read from there)", source(export, "node-1", longhorn.BackingImageStateFailed), "node-2", true},
		{"new, no status yet", source(export, "node-1", ""), "node-2", true},
		{"on the engine's node", source(export, "node-2", longhorn.BackingImageStatePending), "node-2", false},
		{"the volume is not attached: no node to move to", source(export, "node-1", longhorn.BackingImageStatePending), "", false},
		{"reading the volume already", source(export, "node-1", longhorn.BackingImageStateInProgress), "node-2", false},
		{"its file is ready", source(export, "node-1", longhorn.BackingImageStateReadyForTransfer), "node-2", false},
		{"its server is starting", source(export, "node-1", longhorn.BackingImageStateStarting), "node-2", false},
		{"its file was handed over", source(export, "node-1", longhorn.BackingImageStateFailed,
			func(b *longhorn.BackingImageDataSource) { b.Spec.FileTransferred = true }), "node-2", false},
		{"being deleted", source(export, "node-1", longhorn.BackingImageStatePending,
			func(b *longhorn.BackingImageDataSource) { b.DeletionTimestamp = &now }), "node-2", false},
		{"a download goes nowhere", source(longhorn.BackingImageDataSourceTypeDownload, "node-1", longhorn.BackingImageStatePending), "node-2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exportMisplaced(tc.bids, tc.engineNode); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
