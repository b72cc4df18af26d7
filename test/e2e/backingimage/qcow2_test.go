//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/controller/volume"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// requireQemuImg skips a test that needs qcow2 images when qemu-img is
// missing; call it before starting a daemon.
func requireQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed (Debian package qemu-utils, which scripts/test.sh installs): no qcow2 image to test with")
	}
}

// qemuImg runs qemu-img and returns the bytes of the image it wrote at
// out.
func qemuImg(t *testing.T, out string, args ...string) []byte {
	t.Helper()
	if msg, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, msg)
	}
	image, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return image
}

// qcow2Image makes a compressed qcow2 image (64 KiB clusters) of a raw
// disk of size bytes: random data, a hole, a region that compresses. It
// returns the raw disk and the image's bytes.
func qcow2Image(t *testing.T, size int) ([]byte, []byte) {
	t.Helper()
	raw := make([]byte, size)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	clear(raw[512<<10 : 1<<20+4096])
	for i := 2 << 20; i < 2<<20+256<<10; i++ {
		raw[i] = byte(i / 1000)
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(src, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return raw, qemuImg(t, dst, "convert", "-c", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=65536", src, dst)
}

// TestVolumeOnAQcow2BackingImage: a qcow2 image downloaded from a local
// HTTP server tells its virtual size once ready; a volume smaller than it
// is refused by the API and, created with kubectl, waits saying why; a
// volume large enough reads the image's disk (not the file's bytes)
// through NBD, and writes never reach the file.
func TestVolumeOnAQcow2BackingImage(t *testing.T) {
	requireQemuImg(t)
	raw, image := qcow2Image(t, 3<<20+5*512)
	e, disks, replicaDisk, otherDisk := framework.TwoDiskAPIEnv(t)
	sum, url := framework.ServeFile(t, "disk.qcow2", image)
	createDownloadImage(t, e.LH, e.NS, "qimg", url, sum, map[string]string{otherDisk: disks[otherDisk]})

	var bi *longhorn.BackingImage
	framework.Eventually(t, 60*time.Second, "the image is ready and tells its virtual size", func() (bool, error) {
		var err error
		bi, err = e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "qimg", metav1.GetOptions{})
		return err == nil && bi.Status.VirtualSize != 0, err
	})
	if bi.Status.VirtualSize != int64(len(raw)) || bi.Status.Size != int64(len(image)) {
		t.Fatalf("size %d, virtual size %d: want the file's %d and the disk's %d", bi.Status.Size, bi.Status.VirtualSize, len(image), len(raw))
	}

	r := e.Call(t, "POST", "/v1/volumes", `{"name":"small","size":"3Mi","numberOfReplicas":1,"backingImage":"qimg"}`)
	if r.Status != 400 || !strings.Contains(r.Raw, "smaller than the virtual size") {
		t.Fatalf("a volume smaller than the image: %d %s, want 400 with the reason", r.Status, r.Raw)
	}
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec:       longhorn.VolumeSpec{Size: 3 << 20, NumberOfReplicas: 1, BackingImage: "qimg", NodeID: "node-1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the small volume waits, saying why", func() (bool, error) {
		v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "small", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := conditionOf(v.Status.Conditions, volume.ConditionTypeWaitForBackingImage)
		return c.Status == longhorn.ConditionStatusTrue && strings.Contains(c.Message, "smaller than the virtual size") &&
			v.Status.State == longhorn.VolumeStateDetached, nil
	})

	e.Call(t, "POST", "/v1/volumes", `{"name":"vm","size":"8Mi","numberOfReplicas":2,"backingImage":"qimg"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/vm?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolumeFor(t, 120*time.Second, "vm", "the volume attached on its qcow2 image", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	want := make([]byte, 8<<20)
	copy(want, raw)
	endpoint := v["endpoint"].(string)
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read the qcow2 image's disk")
	}

	framework.QemuIO(t, endpoint, "write -P 0xcd 700k 4k", "write -z 2M 8k", "flush")
	for i := 700 << 10; i < 704<<10; i++ {
		want[i] = 0xcd
	}
	clear(want[2<<20 : 2<<20+8192])
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read its writes over the qcow2 image")
	}
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "qimg", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(filepath.Join(backingimage.FileFolder(disks[replicaDisk], "qimg", bi.Status.UUID), backingimage.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	if s := sha512.Sum512(onDisk); hex.EncodeToString(s[:]) != sum {
		t.Fatal("a write reached the qcow2 image's file")
	}
}

// TestVolumeWaitsOnAQcow2ImageItCannotUse: a qcow2 image with a backing
// file of its own downloads and is ready (its bytes are the image's), but
// has no virtual size; a volume on it waits, saying why, and never starts.
func TestVolumeWaitsOnAQcow2ImageItCannotUse(t *testing.T) {
	requireQemuImg(t)
	overlay := filepath.Join(t.TempDir(), "overlay.qcow2")
	image := qemuImg(t, overlay, "create", "-f", "qcow2", "-u", "-b", "/images/base.raw", "-F", "raw", overlay, "4M")
	e, disks, replicaDisk, _ := framework.TwoDiskAPIEnv(t)
	sum, url := framework.ServeFile(t, "overlay.qcow2", image)
	createDownloadImage(t, e.LH, e.NS, "overlay", url, sum, map[string]string{replicaDisk: disks[replicaDisk]})
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "on-overlay"},
		Spec:       longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, BackingImage: "overlay", NodeID: "node-1"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the volume waits, saying why the image cannot be used", func() (bool, error) {
		v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "on-overlay", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := conditionOf(v.Status.Conditions, volume.ConditionTypeWaitForBackingImage)
		return c.Status == longhorn.ConditionStatusTrue && strings.Contains(c.Message, "not a disk image volumes can use") &&
			strings.Contains(c.Message, "/images/base.raw") && v.Status.State == longhorn.VolumeStateDetached, nil
	})
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "overlay", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := bi.Status.DiskFileStatusMap[replicaDisk]; f == nil || f.State != longhorn.BackingImageStateReady || bi.Status.VirtualSize != 0 {
		t.Fatalf("the image's file %+v, virtual size %d: want ready, with no virtual size", f, bi.Status.VirtualSize)
	}
}
