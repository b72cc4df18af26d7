package volume

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestImageUnfitForVolume(t *testing.T) {
	ready := func(msg string) map[string]*longhorn.BackingImageDiskFileStatus {
		return map[string]*longhorn.BackingImageDiskFileStatus{"d1": {State: longhorn.BackingImageStateReady, Message: msg}}
	}
	cases := []struct {
		name       string
		volumeSize int64
		status     longhorn.BackingImageStatus
		reason     string // "" when the volume may start
	}{
		{name: "a volume as large as the image starts", volumeSize: 1 << 30,
			status: longhorn.BackingImageStatus{Size: 1 << 20, VirtualSize: 1 << 30, DiskFileStatusMap: ready("")}},
		{name: "a volume larger than the image starts", volumeSize: 2 << 30,
			status: longhorn.BackingImageStatus{Size: 1 << 20, VirtualSize: 1 << 30, DiskFileStatusMap: ready("")}},
		{name: "an image with no ready file yet does not hold the volume back", volumeSize: 1 << 20,
			status: longhorn.BackingImageStatus{Size: 1 << 20, DiskFileStatusMap: map[string]*longhorn.BackingImageDiskFileStatus{
				"d1": {State: longhorn.BackingImageStateInProgress}}}},
		{name: "a volume smaller than the image's virtual size waits with the reason", volumeSize: 1 << 30,
			status: longhorn.BackingImageStatus{Size: 1 << 20, VirtualSize: 1<<30 + 512, DiskFileStatusMap: ready("")},
			reason: "volume size 1073741824 is smaller than the virtual size 1073742336 of backing image img"},
		{name: "a ready file that is no disk image replicas can open holds the volume back with its message", volumeSize: 1 << 30,
			status: longhorn.BackingImageStatus{Size: 1 << 20, DiskFileStatusMap: ready("volumes cannot use it: qcow2: encrypted")},
			reason: "backing image img is not a disk image volumes can use: volumes cannot use it: qcow2: encrypted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "v"}, Spec: longhorn.VolumeSpec{Size: c.volumeSize, BackingImage: "img"}}
			bi := &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "img"}, Status: c.status}
			reason := imageUnfitForVolume(v, bi)
			if (reason == "") != (c.reason == "") || !strings.Contains(reason, c.reason) {
				t.Fatalf("reason %q, want %q", reason, c.reason)
			}
		})
	}
}
