package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestVolumeManagerRefusesAVolumeSmallerThanItsBackingImage: once an
// image's virtual size is known, a smaller volume is refused, naming the
// field; an image not there yet, or of unknown size, lets the volume be
// created (it waits for the image).
func TestVolumeManagerRefusesAVolumeSmallerThanItsBackingImage(t *testing.T) {
	m, lh, ns := newManager(t)
	ctx := context.Background()
	bi, err := lh.LonghornV1beta2().BackingImages(ns).Create(ctx, &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "img"},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{longhorn.DataSourceParameterURL: "http://127.0.0.1:1/img.qcow2"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitCached(t, "image cached", func() bool { _, err := m.ds.GetBackingImageRO("img"); return err == nil })
	if _, err := m.CreateVolume(ctx, "unknown-size", longhorn.VolumeSpec{Size: 1 << 20, NumberOfReplicas: 1, BackingImage: "img"}, nil, ""); err != nil {
		t.Fatalf("an image of unknown size: %v", err)
	}
	if _, err := m.CreateVolume(ctx, "no-image", longhorn.VolumeSpec{Size: 1 << 20, NumberOfReplicas: 1, BackingImage: "later"}, nil, ""); err != nil {
		t.Fatalf("an image not created yet: %v", err)
	}

	bi.Status.VirtualSize = 1 << 30
	if _, err := lh.LonghornV1beta2().BackingImages(ns).UpdateStatus(ctx, bi, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCached(t, "virtual size cached", func() bool {
		bi, err := m.ds.GetBackingImageRO("img")
		return err == nil && bi.Status.VirtualSize == 1<<30
	})
	_, err = m.CreateVolume(ctx, "small", longhorn.VolumeSpec{Size: 1<<30 - 512, NumberOfReplicas: 1, BackingImage: "img"}, nil, "")
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "size: 1073741312 is smaller than the virtual size 1073741824 of backing image img") {
		t.Fatalf("a volume smaller than its image: %v", err)
	}
	if _, err := m.CreateVolume(ctx, "fits", longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1, BackingImage: "img"}, nil, ""); err != nil {
		t.Fatalf("a volume as large as its image: %v", err)
	}
}
