//go:build e2e

package csisidecars

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSIStorageClassMakesItsBackingImage: a StorageClass naming a
// backing image that does not exist, with a download source and its
// SHA512, through the real external-provisioner: the claim becomes Bound,
// the driver made the image from those parameters, the image's file
// becomes ready with that checksum, and the volume, attached through a
// VolumeAttachment and the real external-attacher, reads the image's
// bytes over NBD (and zeros past them). A second StorageClass naming the
// same image with another checksum leaves its claim Pending, the
// provisioner's event naming backingImageChecksum, and makes no volume
// and changes nothing of the image.
func TestCSIStorageClassMakesItsBackingImage(t *testing.T) {
	// The image servers run from the test binary, which lets them reach
	// the test's HTTP server on loopback (see TestMain).
	s := newSidecarEnv(t, framework.WithTestServers)
	ctx := context.Background()
	const image = "csi-base"
	content, sum, url := framework.ServeImage(t, 3<<20+4321)

	if r := s.Call(t, "GET", "/v1/backingimages/"+image, ""); r.Status != 404 {
		t.Fatalf("backing image %s before any claim: %d %s, want 404", image, r.Status, r.Raw)
	}
	sc := s.storageClass(t, "bi", map[string]string{
		"backingImage":                     image,
		"backingImageDataSourceType":       "download",
		"backingImageDataSourceParameters": `{"url":"` + url + `"}`,
		"backingImageChecksum":             sum,
		"backingImageMinNumberOfCopies":    "2",
	})
	s.claim(t, "on-image", sc)
	pv := s.waitBound(t, "on-image")
	name := pv.Spec.CSI.VolumeHandle
	if v := s.volume(t, pv); v.Spec.BackingImage != image {
		t.Fatalf("volume %s: backingImage %q, want %q", name, v.Spec.BackingImage, image)
	}

	// The driver made the image as the StorageClass describes it, and its
	// file becomes ready with the checksum the StorageClass gave.
	bi, err := s.LH.LonghornV1beta2().BackingImages(s.NS).Get(ctx, image, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("backing image %s after the claim was bound: %v", image, err)
	}
	if bi.Spec.SourceType != longhorn.BackingImageDataSourceTypeDownload || bi.Spec.SourceParameters[longhorn.DataSourceParameterURL] != url || bi.Spec.Checksum != sum || bi.Spec.MinNumberOfCopies != 2 {
		t.Fatalf("backing image %s: source %s %v, checksum %q, min copies %d; want download from %s with the StorageClass's checksum and 2 copies", image, bi.Spec.SourceType, bi.Spec.SourceParameters, bi.Spec.Checksum, bi.Spec.MinNumberOfCopies, url)
	}
	framework.Eventually(t, 2*time.Minute, "backing image "+image+" ready on a disk with its checksum", func() (bool, error) {
		r := s.Call(t, "GET", "/v1/backingimages/"+image, "")
		if r.Status != 200 || r.Body["currentChecksum"] != sum {
			return false, nil
		}
		files, _ := r.Body["diskFileStatusMap"].(map[string]any)
		for _, f := range files {
			if st, _ := f.(map[string]any); st["state"] == string(longhorn.BackingImageStateReady) {
				return true, nil
			}
		}
		return false, nil
	})

	// Attached as the attach/detach controller and the external-attacher
	// attach it for a pod, the volume reads the image's bytes.
	va := s.attachByVolumeAttachment(t, pv, "bi")
	v := s.WaitVolumeFor(t, 30*time.Second, name, "volume attached on node-1", func(v map[string]any) bool {
		return v["state"] == "attached" && v["currentNodeID"] == "node-1" && v["endpoint"] != ""
	})
	got := framework.DeviceContent(t, v["endpoint"].(string))
	if len(got) < len(content) {
		t.Fatalf("the volume reads %d bytes, fewer than the image's %d", len(got), len(content))
	}
	if !bytes.Equal(got[:1<<20], content[:1<<20]) {
		t.Fatal("the volume's first MiB is not the backing image's")
	}
	if !bytes.Equal(got[:len(content)], content) {
		t.Fatal("the volume does not read the whole backing image")
	}
	if i := bytes.IndexFunc(got[len(content):], func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("the volume reads a non-zero byte at %d, past the image's %d bytes", len(content)+i, len(content))
	}
	if err := s.Kube.StorageV1().VolumeAttachments().Delete(ctx, va, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "VolumeAttachment gone once detached", func() (bool, error) {
		_, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	s.WaitVolumeFor(t, 30*time.Second, name, "volume detached", func(v map[string]any) bool {
		return v["state"] == "detached" && v["currentNodeID"] == ""
	})

	// Another StorageClass names the same image with another checksum.
	before, err := s.LH.LonghornV1beta2().Volumes(s.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := sha512.Sum512([]byte("not the image"))
	otherSum := hex.EncodeToString(other[:])
	sc2 := s.storageClass(t, "bi-other-sum", map[string]string{
		"backingImage":                     image,
		"backingImageDataSourceType":       "download",
		"backingImageDataSourceParameters": `{"url":"` + url + `"}`,
		"backingImageChecksum":             otherSum,
	})
	s.claim(t, "other-sum", sc2)
	s.claimRefused(t, "other-sum", len(before.Items), "InvalidArgument", "backingImageChecksum", image)
	if bi, err := s.LH.LonghornV1beta2().BackingImages(s.NS).Get(ctx, image, metav1.GetOptions{}); err != nil {
		t.Error(err)
	} else if bi.Spec.Checksum != sum {
		t.Errorf("backing image %s after the refused claim: checksum %q, want the first StorageClass's", image, bi.Spec.Checksum)
	}
}

// attachByVolumeAttachment makes the Kubernetes node a pod would run on,
// its CSINode naming the Longhorn node node-1 for the driver, and the
// VolumeAttachment the attach/detach controller would make for the PV on
// it, and waits until the external-attacher reports it attached. It
// returns the VolumeAttachment's name.
func (s *sidecarEnv) attachByVolumeAttachment(t *testing.T, pv *corev1.PersistentVolume, name string) string {
	t.Helper()
	ctx := context.Background()
	node := s.prefix + "-node"
	if _, err := s.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := s.Kube.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: csi.DriverName, NodeID: "node-1"}}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pvName := pv.Name
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-va-" + name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: csi.DriverName,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
		},
	}
	if _, err := s.Kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "VolumeAttachment "+va.Name+" attached", func() (bool, error) {
		got, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if e := got.Status.AttachError; e != nil {
			t.Logf("attach error: %s", e.Message)
		}
		return got.Status.Attached, nil
	})
	return va.Name
}
