//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func createDownloadImage(t *testing.T, lh lhclientset.Interface, ns, name, url, checksum string, disks map[string]string) {
	t.Helper()
	spec := longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeDownload,
		SourceParameters: map[string]string{longhorn.DataSourceParameterURL: url}, Checksum: checksum, Disks: map[string]string{}}
	for disk := range disks {
		spec.Disks[disk] = ""
	}
	if _, err := lh.LonghornV1beta2().BackingImages(ns).Create(context.Background(),
		&longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestBackingImageDownloadReachesBothDisksAndIsCleanedUp(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t)
	content, sum, url := framework.ServeImage(t, 3<<20)
	createDownloadImage(t, lh, ns, "cirros", url, sum, disks)

	bi := framework.WaitReady(t, lh, ns, "cirros", disks, "")
	if bi.Status.Checksum != sum || bi.Status.Size != int64(len(content)) {
		t.Fatalf("status checksum %s size %d, want %s and %d", bi.Status.Checksum, bi.Status.Size, sum, len(content))
	}
	for disk, path := range disks {
		got, err := os.ReadFile(filepath.Join(backingimage.FileFolder(path, "cirros", bi.Status.UUID), backingimage.DataFile))
		if err != nil {
			t.Fatalf("disk %s: %v", disk, err)
		}
		if !bytes.Equal(got, content) {
			t.Fatalf("disk %s: the file's %d bytes differ from the source's", disk, len(got))
		}
	}
	framework.Eventually(t, 30*time.Second, "the data source is marked transferred and its server stopped", func() (bool, error) {
		bids, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "cirros", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return bids.Spec.FileTransferred && bids.Status.IP == "", nil
	})

	if err := lh.LonghornV1beta2().BackingImages(ns).Delete(context.Background(), "cirros", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the backing image, its data source and its files are gone", func() (bool, error) {
		if _, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "cirros", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		if _, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "cirros", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		for _, path := range disks {
			if _, err := os.Stat(backingimage.FileFolder(path, "cirros", bi.Status.UUID)); !errors.Is(err, fs.ErrNotExist) {
				return false, nil
			}
		}
		return true, nil
	})
	// With no image left, the managers go, and so do their processes.
	framework.Eventually(t, 30*time.Second, "the managers of the disks are deleted", func() (bool, error) {
		l, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil && len(l.Items) == 0, err
	})
	d.Stop(t)
}

func TestBackingImageWithAWrongChecksumFailsAndIsNeverReady(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t)
	_, _, url := framework.ServeImage(t, 1<<20)
	other := sha512.Sum512([]byte("another image"))
	createDownloadImage(t, lh, ns, "wrong-sum", url, hex.EncodeToString(other[:]), disks)

	var addresses []string
	framework.Eventually(t, 90*time.Second, "the file fails with the reason", func() (bool, error) {
		bi, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "wrong-sum", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		failed := false
		for disk, f := range bi.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateReady {
				t.Fatalf("disk %s is ready with a wrong checksum", disk)
			}
			if f.State == longhorn.BackingImageStateFailed {
				if !strings.Contains(strings.ToLower(f.Message), "checksum") {
					t.Fatalf("disk %s failed without naming the checksum: %q", disk, f.Message)
				}
				failed = true
			}
		}
		bids, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "wrong-sum", metav1.GetOptions{})
		if err == nil && bids.Status.IP != "" {
			addresses = append(addresses, bids.Status.IP)
		}
		return failed, nil
	})
	bims, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, bim := range bims.Items {
		if bim.Status.IP != "" {
			addresses = append(addresses, bim.Status.IP)
		}
	}
	if len(addresses) == 0 {
		t.Fatal("no server address recorded")
	}
	// Stopping the daemon stops every server it started.
	d.Stop(t)
	for _, addr := range addresses {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("a backing image server still answers on %s after the daemon stopped", addr)
		}
	}
}

func TestBackingImageFilesAreReusedAfterADaemonRestart(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t)
	content, sum, url := framework.ServeImage(t, 1<<20)
	createDownloadImage(t, lh, ns, "reused", url, sum, disks)
	before := framework.WaitReady(t, lh, ns, "reused", disks, "")
	d.Stop(t)

	// The new daemon's managers find the files on the disks and check them
	// again; nothing is downloaded twice.
	framework.RestartDaemon()
	after := framework.WaitReady(t, lh, ns, "reused", disks, "reused the file on the disk")
	if after.Status.UUID != before.Status.UUID || after.Status.Checksum != sum {
		t.Fatalf("after the restart: uuid %s checksum %s, want %s and %s", after.Status.UUID, after.Status.Checksum, before.Status.UUID, sum)
	}
	for disk, path := range disks {
		got, err := os.ReadFile(filepath.Join(backingimage.FileFolder(path, "reused", after.Status.UUID), backingimage.DataFile))
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("disk %s: the file differs from the source after the restart (%v)", disk, err)
		}
	}
}
