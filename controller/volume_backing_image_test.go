package controller

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestVolumeTooSmallForImage(t *testing.T) {
	cases := []struct {
		name        string
		volumeSize  int64
		virtualSize int64
		refused     bool
	}{
		{name: "a volume as large as the image starts", volumeSize: 1 << 30, virtualSize: 1 << 30},
		{name: "a volume larger than the image starts", volumeSize: 2 << 30, virtualSize: 1 << 30},
		{name: "an image whose size is not known yet does not hold the volume back", volumeSize: 1 << 20},
		{name: "a volume smaller than the image's virtual size waits with the reason", volumeSize: 1 << 30, virtualSize: 1<<30 + 512, refused: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: longhorn.VolumeSpec{Size: c.volumeSize, BackingImage: "img"}}
			bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Status: longhorn.BackingImageStatus{VirtualSize: c.virtualSize}}
			reason := volumeTooSmallForImage(v, bi)
			if (reason != "") != c.refused {
				t.Fatalf("reason %q, want refused %v", reason, c.refused)
			}
			if c.refused && !strings.Contains(reason, "smaller than the virtual size") {
				t.Fatalf("reason %q does not say why", reason)
			}
		})
	}
}
