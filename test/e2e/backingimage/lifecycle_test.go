//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/backingimage"
	bicontroller "github.com/cadence-storage/longhorn-manager/controller/backingimage"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// countingImageServer serves content (what serve answers, which a test
// may change) and counts the downloads.
func countingImageServer(t *testing.T, serve func() []byte) (url string, downloads *atomic.Int32) {
	t.Helper()
	downloads = &atomic.Int32{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downloads.Add(1)
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(serve()))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/image.raw", downloads
}

func sha512Hex(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

// hasEvent reports whether an event of reason about the object says want.
func hasEvent(t *testing.T, ns, object, reason, want string) bool {
	t.Helper()
	events, err := testcluster.Get(t).KubeClient(t).CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == object && e.Reason == reason && strings.Contains(e.Message, want) {
			return true
		}
	}
	return false
}

func imageFile(disk, name, uuid string) string {
	return filepath.Join(backingimage.FileFolder(disk, name, uuid), backingimage.DataFile)
}

// TestBackingImageEveryCopyFailedIsDownloadedAgain: both copies of a
// ready image are corrupted on their disks; after a restart the managers
// find them wrong, and since the source is a download the file is fetched
// again (a Redownload condition and event say why), and is ready on both
// disks with the source's bytes. Nothing corrupt is ever ready.
func TestBackingImageEveryCopyFailedIsDownloadedAgain(t *testing.T) {
	lh, ns, d, disks := framework.TwoDiskNode(t)
	content := bytes.Repeat([]byte("every copy failed "), 60_000)
	url, downloads := countingImageServer(t, func() []byte { return content })
	createDownloadImage(t, lh, ns, "fragile", url, sha512Hex(content), disks)
	bi := framework.WaitReady(t, lh, ns, "fragile", disks, "")
	d.Stop(t)

	for _, path := range disks {
		corrupt := bytes.Repeat([]byte{0x5a}, len(content))
		if err := os.WriteFile(imageFile(path, "fragile", bi.Status.UUID), corrupt, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	framework.RestartDaemon()
	// The status written before the restart says ready until the new
	// managers have looked at the files.
	framework.Eventually(t, 60*time.Second, "the corrupt copies are found", func() (bool, error) {
		got, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "fragile", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, f := range got.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateReady {
				return false, nil
			}
		}
		return true, nil
	})
	framework.Eventually(t, 120*time.Second, "every copy failed and the file is downloaded again, saying why", func() (bool, error) {
		got, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "fragile", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for disk, f := range got.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateReady && downloads.Load() < 2 {
				t.Fatalf("disk %s: a corrupt copy is ready", disk)
			}
		}
		c := conditionOf(got.Status.Conditions, bicontroller.ConditionTypeRedownload)
		return c.Reason == "EveryCopyFailed" || c.Reason == "Recovered", nil
	})
	after := framework.WaitReady(t, lh, ns, "fragile", disks, "")
	if n := downloads.Load(); n != 2 {
		t.Fatalf("%d downloads, want the first and one more", n)
	}
	if after.Status.UUID != bi.Status.UUID {
		t.Fatalf("the image's uuid changed from %s to %s", bi.Status.UUID, after.Status.UUID)
	}
	for disk, path := range disks {
		if got, err := os.ReadFile(imageFile(path, "fragile", after.Status.UUID)); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("disk %s: the file differs from the source after the new download (%v)", disk, err)
		}
	}
	if !hasEvent(t, ns, "fragile", "Redownload", "every copy of the file failed") {
		t.Error("no Redownload event says why the file was downloaded again")
	}
	framework.Eventually(t, 30*time.Second, "the Redownload condition says the file recovered", func() (bool, error) {
		got, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "fragile", metav1.GetOptions{})
		return err == nil && conditionOf(got.Status.Conditions, bicontroller.ConditionTypeRedownload).Reason == "Recovered", err
	})
}

// TestBackingImageFailedDownloadIsRetriedAfterTheBackoff: a download
// whose bytes do not match the expected checksum fails with the reason
// and an event; once the source serves the right bytes, the data source
// started again after the backoff downloads them and the image is ready.
func TestBackingImageFailedDownloadIsRetriedAfterTheBackoff(t *testing.T) {
	lh, ns, _, disks := framework.TwoDiskNode(t)
	good := bytes.Repeat([]byte("the right bytes "), 40_000)
	var fixed atomic.Bool
	url, downloads := countingImageServer(t, func() []byte {
		if fixed.Load() {
			return good
		}
		return bytes.Repeat([]byte("the wrong bytes "), 40_000)
	})
	createDownloadImage(t, lh, ns, "flaky", url, sha512Hex(good), disks)
	framework.Eventually(t, 60*time.Second, "the download fails with the reason, and an event says it is retried", func() (bool, error) {
		bids, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "flaky", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return bids.Status.CurrentState == longhorn.BackingImageStateFailed && strings.Contains(strings.ToLower(bids.Status.Message), "checksum") &&
			hasEvent(t, ns, "flaky", "DataSourceFailed", "downloading again in"), nil
	})
	fixed.Store(true)
	bi := framework.WaitReady(t, lh, ns, "flaky", disks, "")
	if downloads.Load() < 2 {
		t.Fatalf("%d downloads, want another after the failure", downloads.Load())
	}
	for disk, path := range disks {
		if got, err := os.ReadFile(imageFile(path, "flaky", bi.Status.UUID)); err != nil || !bytes.Equal(got, good) {
			t.Fatalf("disk %s: the file differs from the source (%v)", disk, err)
		}
	}
}

// TestBackingImageManagerOfAnOldImageIsReplacedWithoutADownload: the
// daemon restarts with another default backing image manager image; each
// disk gets a manager of the new image, which finds the files on the disk
// and verifies them; the old managers go; nothing is downloaded again, the
// files are never rewritten, and a volume on the image reads its bytes
// before and after.
func TestBackingImageManagerOfAnOldImageIsReplacedWithoutADownload(t *testing.T) {
	const oldImage, newImage = "longhorn-manager:v1", "longhorn-manager:v2"
	e, disks, _, _ := framework.TwoDiskAPIEnv(t, func(o *app.DaemonOptions) { o.BackingImageManagerImage = oldImage })
	lh, ns := e.LH, e.NS
	content := bytes.Repeat([]byte("kept across managers "), 50_000)
	url, downloads := countingImageServer(t, func() []byte { return content })
	createDownloadImage(t, lh, ns, "kept", url, sha512Hex(content), disks)
	bi := framework.WaitReady(t, lh, ns, "kept", disks, "")
	e.Call(t, "POST", "/v1/volumes", `{"name":"vm","size":"2Mi","numberOfReplicas":1,"backingImage":"kept"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/vm?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	readsTheImage := func(what string) {
		t.Helper()
		v := e.WaitVolumeFor(t, 90*time.Second, "vm", what, func(v map[string]any) bool {
			return v["state"] == "attached" && v["endpoint"] != ""
		})
		want := make([]byte, 2<<20)
		copy(want, content)
		if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
			t.Fatalf("%s: the volume does not read its backing image's bytes", what)
		}
	}
	readsTheImage("the volume attached on the image")

	oldManagers, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	oldNames := map[string]bool{}
	for _, bim := range oldManagers.Items {
		if bim.Spec.Image != oldImage {
			t.Fatalf("manager %s runs from %s, want %s", bim.Name, bim.Spec.Image, oldImage)
		}
		oldNames[bim.Name] = true
	}
	before := map[string]os.FileInfo{}
	for disk, path := range disks {
		if before[disk], err = os.Stat(imageFile(path, "kept", bi.Status.UUID)); err != nil {
			t.Fatal(err)
		}
	}
	framework.TwoDiskDaemon.Stop(t)

	d := framework.RestartDaemon(func(o *app.DaemonOptions) { o.BackingImageManagerImage = newImage })
	e.Base = "http://" + d.APIAddress
	framework.Eventually(t, 90*time.Second, "every disk's manager is of the new image and the old ones are gone", func() (bool, error) {
		l, err := lh.LonghornV1beta2().BackingImageManagers(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		perDisk := map[string]bool{}
		for _, bim := range l.Items {
			if bim.Spec.Image != newImage || oldNames[bim.Name] {
				return false, nil
			}
			perDisk[bim.Spec.DiskUUID] = true
		}
		return len(perDisk) == len(disks) && len(l.Items) == len(disks), nil
	})
	after := framework.WaitReady(t, lh, ns, "kept", disks, "reused the file on the disk")
	readsTheImage("the volume attached again after the managers were replaced")
	if n := downloads.Load(); n != 1 {
		t.Fatalf("%d downloads, want only the first", n)
	}
	for disk, path := range disks {
		st, err := os.Stat(imageFile(path, "kept", after.Status.UUID))
		if err != nil {
			t.Fatal(err)
		}
		if !os.SameFile(st, before[disk]) || !st.ModTime().Equal(before[disk].ModTime()) {
			t.Fatalf("disk %s: the file was replaced or rewritten", disk)
		}
		if got, err := os.ReadFile(imageFile(path, "kept", after.Status.UUID)); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("disk %s: the file differs from the source (%v)", disk, err)
		}
	}
}

// TestBackingImageCleanupAndDeletionFollowTheReplicas: with a volume's
// replica on one disk, the image's file on the other disk is stamped
// unused; once the cleanup wait interval has passed it is removed from
// spec.disks and deleted, but only down to minNumberOfCopies ready copies,
// and never the disk the replica uses. Deleting the image with kubectl
// while the replica uses it keeps everything, with the DeletionBlocked
// condition and a Warning event naming the volume; once the volume is
// deleted, the image's deletion completes.
//
// The daemon runs with the setting's unit at a second, so the interval of
// 1 (a minute in production) takes a second here.
func TestBackingImageCleanupAndDeletionFollowTheReplicas(t *testing.T) {
	e, disks, replicaDisk, otherDisk := framework.TwoDiskAPIEnv(t, func(o *app.DaemonOptions) { o.Hooks.BackingImageCleanupWaitUnit = time.Second })
	content, sum, url := framework.ServeImage(t, 1<<20)
	createDownloadImage(t, e.LH, e.NS, "base", url, sum, disks)
	bi := framework.WaitReady(t, e.LH, e.NS, "base", disks, "")
	e.Call(t, "POST", "/v1/volumes", `{"name":"vm","size":"4Mi","numberOfReplicas":1,"backingImage":"base"}`).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "the volume's replica uses the image on its disk, the other disk is stamped unused", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, usedStamped := got.Status.DiskLastRefAtMap[replicaDisk]
		_, otherStamped := got.Status.DiskLastRefAtMap[otherDisk]
		return !usedStamped && otherStamped, nil
	})
	updateImage := func(change func(*longhorn.BackingImage)) {
		t.Helper()
		err := datastore.RetryOnConflict(func() error {
			got, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(got)
			_, err = e.LH.LonghornV1beta2().BackingImages(e.NS).Update(context.Background(), got, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Two copies wanted: the unused one stays past the interval.
	updateImage(func(bi *longhorn.BackingImage) { bi.Spec.MinNumberOfCopies = 2 })
	e.Call(t, "PUT", "/v1/settings/backing-image-cleanup-wait-interval", `{"value":"1"}`).Expect(t, 200, `"value":"1"`)
	time.Sleep(4 * time.Second)
	got, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.Disks) != 2 {
		t.Fatalf("with minNumberOfCopies 2 the disks are %v, want both", got.Spec.Disks)
	}

	// One copy wanted: the unused disk goes, the replica's stays.
	updateImage(func(bi *longhorn.BackingImage) { bi.Spec.MinNumberOfCopies = 1 })
	framework.Eventually(t, 60*time.Second, "the unused copy is cleaned up", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, kept := got.Spec.Disks[replicaDisk]
		_, stayed := got.Spec.Disks[otherDisk]
		if !kept {
			t.Fatalf("the disk the replica uses was cleaned up: %v", got.Spec.Disks)
		}
		_, folderErr := os.Stat(backingimage.FileFolder(disks[otherDisk], "base", bi.Status.UUID))
		return !stayed && os.IsNotExist(folderErr) && len(got.Status.DiskLastRefAtMap) == 0, nil
	})
	if !hasEvent(t, e.NS, "base", "CleanedUp", otherDisk) {
		t.Error("no CleanedUp event names the cleaned disk")
	}
	kept := imageFile(disks[replicaDisk], "base", bi.Status.UUID)
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the replica's file changed: %v", err)
	}

	// kubectl delete while the replica uses the image: held.
	if err := e.LH.LonghornV1beta2().BackingImages(e.NS).Delete(context.Background(), "base", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the deletion is held, naming the volume", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := conditionOf(got.Status.Conditions, bicontroller.ConditionTypeDeletionBlocked)
		return got.DeletionTimestamp != nil && c.Status == longhorn.ConditionStatusTrue && strings.Contains(c.Message, "vm") &&
			hasEvent(t, e.NS, "base", "DeletionBlocked", "vm"), nil
	})
	time.Sleep(3 * time.Second)
	if b, err := os.ReadFile(kept); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("the file of a held image changed: %v", err)
	}
	if _, err := e.LH.LonghornV1beta2().BackingImageDataSources(e.NS).Get(context.Background(), "base", metav1.GetOptions{}); err != nil {
		t.Fatalf("the data source of a held image: %v", err)
	}

	// The volume goes: so does the image, with its file.
	e.Call(t, "DELETE", "/v1/volumes/vm", "").Expect(t, 204)
	framework.Eventually(t, 60*time.Second, "the image's deletion completes once no replica uses it", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
		_, folderErr := os.Stat(backingimage.FileFolder(disks[replicaDisk], "base", bi.Status.UUID))
		return apierrors.IsNotFound(err) && os.IsNotExist(folderErr), nil
	})
}
