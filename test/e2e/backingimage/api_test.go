//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestAPIBackingImagesDownloadUploadVolumeCleanupAndDelete: an image
// created by download through the API gets ready; an upload streamed
// through the API shows its progress, gets ready with the right checksum,
// and a volume on it reads its bytes; the image cannot be deleted nor its
// replicas' disk cleaned while the volume uses it; the other disk's copy
// is cleaned up on request; the websocket sees images come and go.
func TestAPIBackingImagesDownloadUploadVolumeCleanupAndDelete(t *testing.T) {
	e, disks, replicaDisk, otherDisk := framework.TwoDiskAPIEnv(t)
	ws := e.Dial(t, "/v1/ws/backingimages")
	framework.NextList(t, ws, "the empty list of backing images", func(n []string, _ string) bool { return len(n) == 0 })

	_, dlSum, url := framework.ServeImage(t, 1<<20)
	e.Call(t, "POST", "/v1/backingimages", `{"name":"dl","sourceType":"download","parameters":{"url":"`+url+`"},"expectedChecksum":"`+dlSum+`","disks":["`+replicaDisk+`","`+otherDisk+`"]}`).
		Expect(t, 200, `"sourceType":"download"`)
	e.Call(t, "POST", "/v1/backingimages", `{"name":"dl","sourceType":"upload"}`).Expect(t, 409, "already exists")
	framework.NextList(t, ws, "the websocket sees the image appear", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "dl" })
	framework.WaitReady(t, e.LH, e.NS, "dl", disks, "")
	e.Call(t, "GET", "/v1/backingimages/dl", "").Expect(t, 200, `"currentChecksum":"`+dlSum+`"`, `"state":"ready"`)

	// The upload: the image's file is prepared on the other disk, and the
	// volume's replicas ask for a copy on theirs.
	content, sum := framework.RandomImage(t, 3<<20+512)
	e.Call(t, "POST", "/v1/backingimages", `{"name":"up","sourceType":"upload","disks":["`+otherDisk+`"]}`).Expect(t, 200, `"upload":`)
	body, ct := framework.MultipartUpload(t, content)
	var midway longhorn.BackingImageDiskFileStatus
	r := e.UploadInTwo(t, "up", len(content), body, ct, func() {
		// The data source is polled every 3 s: the first half shows.
		framework.Eventually(t, 30*time.Second, "the upload's progress shows in diskFileStatusMap", func() (bool, error) {
			midway = e.DiskFile(t, "up", otherDisk)
			return midway.State == longhorn.BackingImageStateInProgress && midway.Progress > 0, nil
		})
	})
	if r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Raw)
	}
	if midway.Progress >= 100 {
		t.Fatalf("midway through the upload the progress was %d", midway.Progress)
	}
	bi := framework.WaitReady(t, e.LH, e.NS, "up", map[string]string{otherDisk: disks[otherDisk]}, "")
	if bi.Status.Checksum != sum || bi.Status.Size != int64(len(content)) {
		t.Fatalf("uploaded image: checksum %s size %d, want %s and %d", bi.Status.Checksum, bi.Status.Size, sum, len(content))
	}
	got, err := os.ReadFile(filepath.Join(backingimage.FileFolder(disks[otherDisk], "up", bi.Status.UUID), backingimage.DataFile))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the file on the disk differs from the upload (%v)", err)
	}
	e.Call(t, "POST", "/v1/backingimages/up?action=upload&size=4", string(body), "Content-Type", ct).Expect(t, 409)

	e.Call(t, "POST", "/v1/volumes", `{"name":"vm","size":"4Mi","numberOfReplicas":1,"backingImage":"up"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/vm?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolumeFor(t, 120*time.Second, "vm", "the volume attached on the uploaded image", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	want := make([]byte, 4<<20)
	copy(want, content)
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read the uploaded image's bytes")
	}

	// In use: no delete, no cleanup of the replicas' disk.
	e.Call(t, "DELETE", "/v1/backingimages/up", "").Expect(t, 409, "backing image up is used by volume vm (replicas vm-r-")
	e.Call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+replicaDisk+`"]}`).Expect(t, 409, "disk "+replicaDisk+": its file is used by replica vm-r-")
	e.Call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["nowhere"]}`).Expect(t, 400, "disks[0]: disk nowhere holds no file")
	// The other disk's copy is not used: it goes now.
	e.Call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+otherDisk+`"]}`).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "the cleaned-up disk's file is removed", func() (bool, error) {
		_, err := os.Stat(backingimage.FileFolder(disks[otherDisk], "up", bi.Status.UUID))
		return os.IsNotExist(err), nil
	})
	if f := e.DiskFile(t, "up", replicaDisk); f.State != longhorn.BackingImageStateReady {
		t.Fatalf("the replicas' disk lost its file: %+v", f)
	}
	e.Call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+otherDisk+`"]}`).Expect(t, 400, "holds no file")

	e.Call(t, "POST", "/v1/volumes/vm?action=detach", "").Expect(t, 200)
	e.Call(t, "DELETE", "/v1/volumes/vm", "").Expect(t, 204)
	framework.Eventually(t, 60*time.Second, "the volume and its replicas are gone", func() (bool, error) {
		rs, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, verr := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "vm", metav1.GetOptions{})
		return len(rs.Items) == 0 && verr != nil, nil
	})
	framework.Eventually(t, 30*time.Second, "the delete is accepted once no volume uses the image", func() (bool, error) {
		r := e.Call(t, "DELETE", "/v1/backingimages/up", "")
		return r.Status == 204, nil
	})
	framework.NextList(t, ws, "the websocket sees the image go", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "dl" })
	e.Call(t, "DELETE", "/v1/backingimages/dl", "").Expect(t, 204)
	framework.NextList(t, ws, "the websocket sees the last image go", func(n []string, _ string) bool { return len(n) == 0 })
}

// TestAPIBackingImageUploadFaults: an upload cut off midway, and one
// whose size does not match, leave the data source failed with the reason
// and nothing ready; an image whose upload failed takes no other; an
// upload that comes late is still taken.
func TestAPIBackingImageUploadFaults(t *testing.T) {
	e, disks, _, otherDisk := framework.TwoDiskAPIEnv(t)
	content, sum := framework.RandomImage(t, 2<<20)
	body, ct := framework.MultipartUpload(t, content)
	// An upload image waits for its file however long it takes: this one
	// gets it after the data source's 30 s stall timeout has passed.
	e.Call(t, "POST", "/v1/backingimages", `{"name":"late","sourceType":"upload","disks":["`+otherDisk+`"]}`).Expect(t, 200)
	lateCreated := time.Now()

	// Cut off: the client sends half the body it announced and hangs up.
	e.Call(t, "POST", "/v1/backingimages", `{"name":"cut","sourceType":"upload","disks":["`+otherDisk+`"]}`).Expect(t, 200)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/backingimages/cut?action=upload&size=%d HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		len(content), strings.TrimPrefix(e.Base, "http://"), ct, len(body))
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the data source receives the first half", func() (bool, error) {
		return e.DiskFile(t, "cut", otherDisk).State == longhorn.BackingImageStateInProgress, nil
	})
	conn.Close()
	framework.Eventually(t, 60*time.Second, "the cut-off upload fails with the reason", func() (bool, error) {
		f := e.DiskFile(t, "cut", otherDisk)
		if f.State == longhorn.BackingImageStateReady {
			t.Fatal("a cut-off upload is ready")
		}
		return f.State == longhorn.BackingImageStateFailed && strings.Contains(f.Message, "cut off"), nil
	})

	// A size that does not match the bytes sent.
	e.Call(t, "POST", "/v1/backingimages", `{"name":"mismatch","sourceType":"upload","disks":["`+otherDisk+`"]}`).Expect(t, 200)
	e.Call(t, "POST", fmt.Sprintf("/v1/backingimages/mismatch?action=upload&size=%d", len(content)+4096), string(body), "Content-Type", ct).
		Expect(t, 400, "size mismatch")
	framework.Eventually(t, 30*time.Second, "the mismatched upload fails with the reason", func() (bool, error) {
		f := e.DiskFile(t, "mismatch", otherDisk)
		return f.State == longhorn.BackingImageStateFailed && strings.Contains(f.Message, "size mismatch"), nil
	})
	// A failed upload takes no second one, and nothing ever became ready.
	e.Call(t, "POST", fmt.Sprintf("/v1/backingimages/mismatch?action=upload&size=%d", len(content)), string(body), "Content-Type", ct).
		Expect(t, 409, "failed")
	time.Sleep(time.Until(lateCreated.Add(datasource.DefaultStallTimeout + 5*time.Second)))
	if f := e.DiskFile(t, "late", otherDisk); f.State != longhorn.BackingImageStatePending {
		t.Fatalf("an upload image waiting for its file is %s: %s", f.State, f.Message)
	}
	e.Call(t, "POST", fmt.Sprintf("/v1/backingimages/late?action=upload&size=%d", len(content)), string(body), "Content-Type", ct).Expect(t, 200)
	if bi := framework.WaitReady(t, e.LH, e.NS, "late", map[string]string{otherDisk: disks[otherDisk]}, ""); bi.Status.Checksum != sum {
		t.Fatalf("the late upload is ready with checksum %s, want %s", bi.Status.Checksum, sum)
	}

	for _, name := range []string{"cut", "mismatch"} {
		bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for disk, f := range bi.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateReady {
				t.Errorf("%s is ready on disk %s", name, disk)
			}
		}
		if bi.Status.Checksum != "" {
			t.Errorf("%s has a checksum %s", name, bi.Status.Checksum)
		}
	}
}
