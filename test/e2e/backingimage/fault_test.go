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
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// childServerPID finds the pid of this test's backing image server whose
// command line holds every one of want.
func childServerPID(t *testing.T, want ...string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cmdline := strings.ReplaceAll(string(raw), "\x00", " ")
		matches := true
		for _, w := range want {
			matches = matches && strings.Contains(cmdline, w)
		}
		if matches {
			return pid
		}
	}
	return 0
}

func TestBackingImageDownloadSurvivesADataSourceServerCrash(t *testing.T) {
	lh, ns, _, disks := framework.TwoDiskNode(t)
	content := bytes.Repeat([]byte("backing image bytes "), 50_000)
	sum512 := sha512.Sum512(content)
	sum := hex.EncodeToString(sum512[:])
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if requests.Add(1) == 1 {
			// The first download gets half the bytes, then nothing until
			// its server is killed.
			w.Header().Set("Content-Length", strconv.Itoa(len(content)))
			_, _ = w.Write(content[:len(content)/2])
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(content))
	}))
	t.Cleanup(srv.Close)
	createDownloadImage(t, lh, ns, "crashy", srv.URL+"/image.raw", sum, disks)

	var uuid string
	framework.Eventually(t, 60*time.Second, "the first download is under way", func() (bool, error) {
		bi, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "crashy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		uuid = bi.Status.UUID
		return uuid != "" && requests.Load() == 1 && childServerPID(t, "backing-image-data-source", "--uuid "+uuid) != 0, nil
	})
	pid := childServerPID(t, "backing-image-data-source", "--uuid "+uuid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	framework.Eventually(t, 30*time.Second, "the crash is recorded with the reason", func() (bool, error) {
		bids, err := lh.LonghornV1beta2().BackingImageDataSources(ns).Get(context.Background(), "crashy", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return bids.Status.CurrentState == longhorn.BackingImageStateFailed && strings.Contains(bids.Status.Message, "killed"), nil
	})
	bi := framework.WaitReady(t, lh, ns, "crashy", disks, "")
	if requests.Load() < 2 {
		t.Fatalf("%d downloads, want a second one after the crash", requests.Load())
	}
	for disk, path := range disks {
		got, err := os.ReadFile(filepath.Join(backingimage.FileFolder(path, "crashy", bi.Status.UUID), backingimage.DataFile))
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("disk %s: the file differs from the source (%v)", disk, err)
		}
	}
}

func TestBackingImageFromAnUnreachableURLFailsWithTheReason(t *testing.T) {
	lh, ns, _, disks := framework.TwoDiskNode(t)
	createDownloadImage(t, lh, ns, "nowhere", "http://127.0.0.1:1/image.raw", "", disks)
	framework.Eventually(t, 60*time.Second, "the file fails with the reason", func() (bool, error) {
		bi, err := lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), "nowhere", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, f := range bi.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateReady {
				t.Fatal("a file from an unreachable URL is ready")
			}
			if f.State == longhorn.BackingImageStateFailed {
				return strings.Contains(f.Message, "127.0.0.1:1"), nil
			}
		}
		return false, nil
	})
}
