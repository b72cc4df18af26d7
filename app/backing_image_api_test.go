package app

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// multipartUpload is what curl -F file=@image.raw sends.
func multipartUpload(t *testing.T, content []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("note", "a form field before the file"); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "image.raw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// uploadInTwo posts body to the upload action in two writes; between them
// it calls midway, which may wait for what the first half caused.
func (e *apiEnv) uploadInTwo(t *testing.T, name string, size int, body []byte, contentType string, midway func()) apiResponse {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		half := len(body) / 2
		if _, err := pw.Write(body[:half]); err != nil {
			pw.CloseWithError(err)
			return
		}
		midway()
		_, err := pw.Write(body[half:])
		pw.CloseWithError(err)
	}()
	resp, err := http.Post(fmt.Sprintf("%s/v1/backingimages/%s?action=upload&size=%d", e.base, name, size), contentType, pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return apiResponse{status: resp.StatusCode, raw: string(raw)}
}

// diskFile reads the image's file status on a disk.
func (e *apiEnv) diskFile(t *testing.T, name, disk string) longhorn.BackingImageDiskFileStatus {
	t.Helper()
	bi, err := e.lh.LonghornV1beta2().BackingImages(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := bi.Status.DiskFileStatusMap[disk]; f != nil {
		return *f
	}
	return longhorn.BackingImageDiskFileStatus{}
}

func randomImage(t *testing.T, size int) ([]byte, string) {
	t.Helper()
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(content)
	return content, hex.EncodeToString(sum[:])
}

// TestAPIBackingImagesDownloadUploadVolumeCleanupAndDelete: an image
// created by download through the API gets ready; an upload streamed
// through the API shows its progress, gets ready with the right checksum,
// and a volume on it reads its bytes; the image cannot be deleted nor its
// replicas' disk cleaned while the volume uses it; the other disk's copy
// is cleaned up on request; the websocket sees images come and go.
func TestAPIBackingImagesDownloadUploadVolumeCleanupAndDelete(t *testing.T) {
	e, disks, replicaDisk, otherDisk := twoDiskAPIEnv(t)
	ws := e.dial(t, "/v1/ws/backingimages")
	nextList(t, ws, "the empty list of backing images", func(n []string, _ string) bool { return len(n) == 0 })

	_, dlSum, url := serveImage(t, 1<<20)
	e.call(t, "POST", "/v1/backingimages", `{"name":"dl","sourceType":"download","parameters":{"url":"`+url+`"},"expectedChecksum":"`+dlSum+`","disks":["`+replicaDisk+`","`+otherDisk+`"]}`).
		expect(t, 200, `"sourceType":"download"`)
	e.call(t, "POST", "/v1/backingimages", `{"name":"dl","sourceType":"upload"}`).expect(t, 409, "already exists")
	nextList(t, ws, "the websocket sees the image appear", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "dl" })
	waitReady(t, e.lh, e.ns, "dl", disks, "")
	e.call(t, "GET", "/v1/backingimages/dl", "").expect(t, 200, `"currentChecksum":"`+dlSum+`"`, `"state":"ready"`)

	// The upload: the image's file is prepared on the other disk, and the
	// volume's replicas ask for a copy on theirs.
	content, sum := randomImage(t, 3<<20+512)
	e.call(t, "POST", "/v1/backingimages", `{"name":"up","sourceType":"upload","disks":["`+otherDisk+`"]}`).expect(t, 200, `"upload":`)
	body, ct := multipartUpload(t, content)
	var midway longhorn.BackingImageDiskFileStatus
	r := e.uploadInTwo(t, "up", len(content), body, ct, func() {
		// The data source is polled every 3 s: the first half shows.
		eventually(t, 30*time.Second, "the upload's progress shows in diskFileStatusMap", func() (bool, error) {
			midway = e.diskFile(t, "up", otherDisk)
			return midway.State == longhorn.BackingImageStateInProgress && midway.Progress > 0, nil
		})
	})
	if r.status != 200 {
		t.Fatalf("upload: %d %s", r.status, r.raw)
	}
	if midway.Progress >= 100 {
		t.Fatalf("midway through the upload the progress was %d", midway.Progress)
	}
	bi := waitReady(t, e.lh, e.ns, "up", map[string]string{otherDisk: disks[otherDisk]}, "")
	if bi.Status.Checksum != sum || bi.Status.Size != int64(len(content)) {
		t.Fatalf("uploaded image: checksum %s size %d, want %s and %d", bi.Status.Checksum, bi.Status.Size, sum, len(content))
	}
	got, err := os.ReadFile(filepath.Join(backingimage.FileFolder(disks[otherDisk], "up", bi.Status.UUID), backingimage.DataFile))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the file on the disk differs from the upload (%v)", err)
	}
	e.call(t, "POST", "/v1/backingimages/up?action=upload&size=4", string(body), "Content-Type", ct).expect(t, 409)

	e.call(t, "POST", "/v1/volumes", `{"name":"vm","size":"4Mi","numberOfReplicas":1,"backingImage":"up"}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/vm?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolumeFor(t, 120*time.Second, "vm", "the volume attached on the uploaded image", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	want := make([]byte, 4<<20)
	copy(want, content)
	if got := deviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read the uploaded image's bytes")
	}

	// In use: no delete, no cleanup of the replicas' disk.
	e.call(t, "DELETE", "/v1/backingimages/up", "").expect(t, 409, "backing image up is used by volume vm (replicas vm-r-")
	e.call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+replicaDisk+`"]}`).expect(t, 409, "disk "+replicaDisk+": its file is used by replica vm-r-")
	e.call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["nowhere"]}`).expect(t, 400, "disks[0]: disk nowhere holds no file")
	// The other disk's copy is not used: it goes now.
	e.call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+otherDisk+`"]}`).expect(t, 200)
	eventually(t, 60*time.Second, "the cleaned-up disk's file is removed", func() (bool, error) {
		_, err := os.Stat(backingimage.FileFolder(disks[otherDisk], "up", bi.Status.UUID))
		return os.IsNotExist(err), nil
	})
	if f := e.diskFile(t, "up", replicaDisk); f.State != longhorn.BackingImageStateReady {
		t.Fatalf("the replicas' disk lost its file: %+v", f)
	}
	e.call(t, "POST", "/v1/backingimages/up?action=backingImageCleanup", `{"disks":["`+otherDisk+`"]}`).expect(t, 400, "holds no file")

	e.call(t, "POST", "/v1/volumes/vm?action=detach", "").expect(t, 200)
	e.call(t, "DELETE", "/v1/volumes/vm", "").expect(t, 204)
	eventually(t, 60*time.Second, "the volume and its replicas are gone", func() (bool, error) {
		rs, err := e.lh.LonghornV1beta2().Replicas(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		_, verr := e.lh.LonghornV1beta2().Volumes(e.ns).Get(context.Background(), "vm", metav1.GetOptions{})
		return len(rs.Items) == 0 && verr != nil, nil
	})
	eventually(t, 30*time.Second, "the delete is accepted once no volume uses the image", func() (bool, error) {
		r := e.call(t, "DELETE", "/v1/backingimages/up", "")
		return r.status == 204, nil
	})
	nextList(t, ws, "the websocket sees the image go", func(n []string, _ string) bool { return len(n) == 1 && n[0] == "dl" })
	e.call(t, "DELETE", "/v1/backingimages/dl", "").expect(t, 204)
	nextList(t, ws, "the websocket sees the last image go", func(n []string, _ string) bool { return len(n) == 0 })
}

// TestAPIBackingImageUploadFaults: an upload cut off midway, and one
// whose size does not match, leave the data source failed with the reason
// and nothing ready; an image whose upload failed takes no other; an
// upload that comes late is still taken.
func TestAPIBackingImageUploadFaults(t *testing.T) {
	e, disks, _, otherDisk := twoDiskAPIEnv(t)
	content, sum := randomImage(t, 2<<20)
	body, ct := multipartUpload(t, content)
	// An upload image waits for its file however long it takes: this one
	// gets it after the data source's 30 s stall timeout has passed.
	e.call(t, "POST", "/v1/backingimages", `{"name":"late","sourceType":"upload","disks":["`+otherDisk+`"]}`).expect(t, 200)
	lateCreated := time.Now()

	// Cut off: the client sends half the body it announced and hangs up.
	e.call(t, "POST", "/v1/backingimages", `{"name":"cut","sourceType":"upload","disks":["`+otherDisk+`"]}`).expect(t, 200)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/backingimages/cut?action=upload&size=%d HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		len(content), strings.TrimPrefix(e.base, "http://"), ct, len(body))
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the data source receives the first half", func() (bool, error) {
		return e.diskFile(t, "cut", otherDisk).State == longhorn.BackingImageStateInProgress, nil
	})
	conn.Close()
	eventually(t, 60*time.Second, "the cut-off upload fails with the reason", func() (bool, error) {
		f := e.diskFile(t, "cut", otherDisk)
		if f.State == longhorn.BackingImageStateReady {
			t.Fatal("a cut-off upload is ready")
		}
		return f.State == longhorn.BackingImageStateFailed && strings.Contains(f.Message, "cut off"), nil
	})

	// A size that does not match the bytes sent.
	e.call(t, "POST", "/v1/backingimages", `{"name":"mismatch","sourceType":"upload","disks":["`+otherDisk+`"]}`).expect(t, 200)
	e.call(t, "POST", fmt.Sprintf("/v1/backingimages/mismatch?action=upload&size=%d", len(content)+4096), string(body), "Content-Type", ct).
		expect(t, 400, "size mismatch")
	eventually(t, 30*time.Second, "the mismatched upload fails with the reason", func() (bool, error) {
		f := e.diskFile(t, "mismatch", otherDisk)
		return f.State == longhorn.BackingImageStateFailed && strings.Contains(f.Message, "size mismatch"), nil
	})
	// A failed upload takes no second one, and nothing ever became ready.
	e.call(t, "POST", fmt.Sprintf("/v1/backingimages/mismatch?action=upload&size=%d", len(content)), string(body), "Content-Type", ct).
		expect(t, 409, "failed")
	time.Sleep(time.Until(lateCreated.Add(datasource.DefaultStallTimeout + 5*time.Second)))
	if f := e.diskFile(t, "late", otherDisk); f.State != longhorn.BackingImageStatePending {
		t.Fatalf("an upload image waiting for its file is %s: %s", f.State, f.Message)
	}
	e.call(t, "POST", fmt.Sprintf("/v1/backingimages/late?action=upload&size=%d", len(content)), string(body), "Content-Type", ct).expect(t, 200)
	if bi := waitReady(t, e.lh, e.ns, "late", map[string]string{otherDisk: disks[otherDisk]}, ""); bi.Status.Checksum != sum {
		t.Fatalf("the late upload is ready with checksum %s, want %s", bi.Status.Checksum, sum)
	}

	for _, name := range []string{"cut", "mismatch"} {
		bi, err := e.lh.LonghornV1beta2().BackingImages(e.ns).Get(context.Background(), name, metav1.GetOptions{})
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
