//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestBackingImageOnADiskThatDisappears: when another disk shows up at a
// disk's path (its longhorn-disk.cfg names another UUID), the image's file
// there is no longer reported ready and says why, nothing on that folder
// is touched, and the other disk's file stays ready; when the disk comes
// back, its file is ready again without a new download.
func TestBackingImageOnADiskThatDisappears(t *testing.T) {
	lh, ns, _, disks := framework.TwoDiskNode(t)
	content, sum, url := framework.ServeImage(t, 1<<20)
	createDownloadImage(t, lh, ns, "img", url, sum, disks)
	bi := framework.WaitReady(t, lh, ns, "img", disks, "")

	node, err := lh.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gone := node.Status.DiskStatus["second-disk"].DiskUUID
	var kept string
	for disk := range disks {
		if disk != gone {
			kept = disk
		}
	}
	cfg := filepath.Join(disks[gone], backingimage.DiskConfigFile)
	original, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`{"diskUUID":"another-disk"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 90*time.Second, "the file on the swapped disk is no longer ready, with the reason", func() (bool, error) {
		got, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "img", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if f := got.Status.DiskFileStatusMap[kept]; f == nil || f.State != longhorn.BackingImageStateReady {
			t.Fatalf("the other disk's file left ready: %+v", f)
		}
		f := got.Status.DiskFileStatusMap[gone]
		return f != nil && f.State != longhorn.BackingImageStateReady && strings.Contains(f.Message, "disk"), nil
	})
	file := filepath.Join(backingimage.FileFolder(disks[gone], "img", bi.Status.UUID), backingimage.DataFile)
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the file on the swapped disk was touched: %v", err)
	}

	if err := os.WriteFile(cfg, original, 0o644); err != nil {
		t.Fatal(err)
	}
	framework.WaitReady(t, lh, ns, "img", disks, "")
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the file differs after the disk came back: %v", err)
	}
}
