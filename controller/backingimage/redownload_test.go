package backingimage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

func TestEveryCopyFailed(t *testing.T) {
	image := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"},
		Spec: longhorn.BackingImageSpec{Disks: map[string]string{"d1": "", "d2": ""}}, Status: longhorn.BackingImageStatus{UUID: "u1"}}
	transferred := &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", DiskUUID: "d1", FileTransferred: true}}
	preparing := &longhorn.BackingImageDataSource{Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", DiskUUID: "d1"}}
	manager := func(state longhorn.BackingImageManagerState, file *longhorn.BackingImageFileInfo) *longhorn.BackingImageManager {
		bim := &longhorn.BackingImageManager{Status: longhorn.BackingImageManagerStatus{CurrentState: state, BackingImageFileMap: map[string]longhorn.BackingImageFileInfo{}}}
		if file != nil {
			bim.Status.BackingImageFileMap["img"] = *file
		}
		return bim
	}
	file := func(state longhorn.BackingImageState) *longhorn.BackingImageFileInfo {
		return &longhorn.BackingImageFileInfo{Name: "img", UUID: "u1", State: state}
	}
	running, stopped := longhorn.BackingImageManagerStateRunning, longhorn.BackingImageManagerStateUnknown
	status := func(s1, s2 longhorn.BackingImageState) map[string]*longhorn.BackingImageDiskFileStatus {
		return map[string]*longhorn.BackingImageDiskFileStatus{"d1": {State: s1, Message: "m1"}, "d2": {State: s2, Message: "m2"}}
	}
	failed, ready, pending, unknown := longhorn.BackingImageStateFailed, longhorn.BackingImageStateReady, longhorn.BackingImageStatePending, longhorn.BackingImageStateUnknown
	cases := []struct {
		name     string
		source   *longhorn.BackingImageDataSource
		managers map[string]*longhorn.BackingImageManager
		files    map[string]*longhorn.BackingImageDiskFileStatus
		want     bool
		wantWhy  []string
	}{
		{"every copy failed after the first file was handed over", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, file(failed)), "d2": manager(running, file(failed))},
			status(failed, failed), true, []string{"disk d1: m1", "disk d2: m2"}},
		{"a copy lost from its disk counts as failed", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, nil), "d2": manager(running, file(failed))},
			status(pending, failed), true, []string{"disk d1: the file is gone"}},
		{"one ready copy is enough", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, file(ready)), "d2": manager(running, file(failed))},
			status(ready, failed), false, nil},
		{"a copy not verified yet may still be good", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, file(unknown)), "d2": manager(running, file(failed))},
			status(unknown, failed), false, nil},
		{"a manager that is not running may still have its copy", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(stopped, nil), "d2": manager(running, file(failed))},
			status(unknown, failed), false, nil},
		{"a disk with no manager yet may still get a copy", transferred,
			map[string]*longhorn.BackingImageManager{"d2": manager(running, file(failed))},
			status(pending, failed), false, nil},
		{"a data source still preparing the file is on it already", preparing,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, file(failed)), "d2": manager(running, file(failed))},
			status(failed, failed), false, nil},
		{"a ready file whose checksum is wrong counts as failed", transferred,
			map[string]*longhorn.BackingImageManager{"d1": manager(running, file(ready)), "d2": manager(running, file(failed))},
			status(failed, failed), true, []string{"disk d1: m1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why := everyCopyFailed(backingImageView{image: image, dataSource: c.source, managers: c.managers}, c.files)
			if got != c.want {
				t.Fatalf("got %v (%s), want %v", got, why, c.want)
			}
			for _, w := range c.wantWhy {
				if !strings.Contains(why, w) {
					t.Fatalf("reason %q does not say %q", why, w)
				}
			}
		})
	}
}

func TestSourcesThatCannotBeFetchedAgainSaySo(t *testing.T) {
	manager := func() *longhorn.BackingImageManager {
		return &longhorn.BackingImageManager{Status: longhorn.BackingImageManagerStatus{CurrentState: longhorn.BackingImageManagerStateRunning,
			BackingImageFileMap: map[string]longhorn.BackingImageFileInfo{"img": {Name: "img", UUID: "u1", State: longhorn.BackingImageStateFailed}}}}
	}
	// The export's snapshot, as its first data source named it.
	exportSnapshot := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "bi-img-u1", Namespace: "longhorn-system"},
		Spec: longhorn.SnapshotSpec{Volume: "vol-1"}}
	for _, c := range []struct {
		name       string
		source     longhorn.BackingImageDataSourceType
		snapshots  []*longhorn.Snapshot
		wantAgain  bool
		wantReason string
		wantInMsg  string
	}{
		{"an upload cannot be fetched again", longhorn.BackingImageDataSourceTypeUpload, nil, false, "UploadCannotBeRedone", "upload it again"},
		{"an export whose snapshot is gone cannot", longhorn.BackingImageDataSourceTypeExportFromVolume, nil, false, "ExportSnapshotGone", "snapshot bi-img-u1 of volume vol-1"},
		{"an export whose snapshot is kept is exported again", longhorn.BackingImageDataSourceTypeExportFromVolume, []*longhorn.Snapshot{exportSnapshot},
			true, "EveryCopyFailed", "exporting snapshot bi-img-u1 of volume vol-1 again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kubefake.NewSimpleClientset(), "longhorn-system", 0)
			for _, s := range c.snapshots {
				inf.Longhorn.Longhorn().V1beta2().Snapshots().Informer().GetIndexer().Add(s)
			}
			ds := datastore.New("longhorn-system", lh, kubefake.NewSimpleClientset(), inf)
			bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"},
				Spec: longhorn.BackingImageSpec{SourceType: c.source, SourceParameters: map[string]string{longhorn.DataSourceParameterVolumeName: "vol-1"},
					Disks: map[string]string{"d1": ""}},
				Status: longhorn.BackingImageStatus{UUID: "u1"}}
			v := backingImageView{image: bi, managers: map[string]*longhorn.BackingImageManager{"d1": manager()},
				dataSource: &longhorn.BackingImageDataSource{ObjectMeta: metav1.ObjectMeta{Name: "img"},
					Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", DiskUUID: "d1", FileTransferred: true}}}
			status := bi.Status.DeepCopy()
			status.DiskFileStatusMap = map[string]*longhorn.BackingImageDiskFileStatus{"d1": {State: longhorn.BackingImageStateFailed, Message: "corrupt"}}
			c2 := &ImageController{ds: ds, clock: clocktesting.NewFakeClock(time.Now())}
			c2.Base = kit.NewBase("test", logrus.NewEntry(logrus.New()), nil, nil)
			again, _, err := c2.redownloadIfEveryCopyFailed(context.Background(), logrus.NewEntry(logrus.New()), v, status, time.Now().Add(time.Hour))
			if err != nil || again != c.wantAgain {
				t.Fatalf("fetched again %v (want %v), err %v", again, c.wantAgain, err)
			}
			cond := kit.GetCondition(status.Conditions, ConditionTypeRedownload)
			want := longhorn.ConditionStatusFalse
			if c.wantAgain {
				want = longhorn.ConditionStatusTrue
			}
			if cond.Status != want || cond.Reason != c.wantReason || !strings.Contains(cond.Message, c.wantInMsg) ||
				!strings.Contains(cond.Message, "corrupt") {
				t.Fatalf("condition %+v", cond)
			}
		})
	}
}
