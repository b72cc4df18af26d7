package manager

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// qemuImgCreate makes a qcow2 image of size with qemu-img create and its
// options, or skips the test.
func qemuImgCreate(t *testing.T, size string, options ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed (Debian package qemu-utils, which scripts/test.sh installs)")
	}
	path := filepath.Join(t.TempDir(), "image.qcow2")
	args := append(append([]string{"create", "-f", "qcow2"}, options...), path, size)
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAReadyQcow2FileTellsItsVirtualSize: the manager reads the virtual
// size from a qcow2 file's header when the file becomes ready; a file
// replicas cannot open is ready all the same (its bytes are the image's),
// with no virtual size and the reason.
func TestAReadyQcow2FileTellsItsVirtualSize(t *testing.T) {
	image := qemuImgCreate(t, "5G", "-o", "cluster_size=65536")
	m := startManager(t, "", "disk-a", nil)
	ds := startUpload(t, m.disk, "disk-a", "cirros", "u1", image)
	if _, err := m.client.Fetch(context.Background(), "cirros", "u1", sha(image), ds, int64(len(image))); err != nil {
		t.Fatal(err)
	}
	info := waitFile(t, m.client, "cirros")
	wantState(t, info, longhorn.BackingImageStateReady)
	if info.VirtualSize != 5<<30 || info.Size != int64(len(image)) {
		t.Fatalf("size %d, virtual size %d: want the file's size and 5 GiB", info.Size, info.VirtualSize)
	}

	overlay := qemuImgCreate(t, "1G", "-u", "-b", "/images/base.raw", "-F", "raw")
	ds = startUpload(t, m.disk, "disk-a", "overlay", "u2", overlay)
	if _, err := m.client.Fetch(context.Background(), "overlay", "u2", sha(overlay), ds, int64(len(overlay))); err != nil {
		t.Fatal(err)
	}
	info = waitFile(t, m.client, "overlay")
	wantState(t, info, longhorn.BackingImageStateReady, "volumes cannot use it", "backing file of its own", "/images/base.raw")
	if info.VirtualSize != 0 {
		t.Fatalf("virtual size %d of a file volumes cannot use, want 0", info.VirtualSize)
	}
}
