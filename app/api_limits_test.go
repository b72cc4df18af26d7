package app

import (
	"fmt"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/api"
)

// TestAPIUploadOutlivesServerTimeouts: with read and write timeouts of a
// second, an upload whose body takes longer, but keeps coming, is still
// taken whole; only a body that stops for UploadIdleTimeout would be cut.
func TestAPIUploadOutlivesServerTimeouts(t *testing.T) {
	e, disks, _, otherDisk := twoDiskAPIEnv(t, func(o *DaemonOptions) {
		o.APITimeouts = api.Timeouts{ReadTimeout: time.Second, WriteTimeout: time.Second, UploadIdleTimeout: 5 * time.Second}
	})
	content, sum := randomImage(t, 1<<20)
	body, ct := multipartUpload(t, content)
	e.call(t, "POST", "/v1/backingimages", `{"name":"slow","sourceType":"upload","disks":["`+otherDisk+`"]}`).expect(t, 200)
	start := time.Now()
	r := e.uploadInTwo(t, "slow", len(content), body, ct, func() { time.Sleep(2500 * time.Millisecond) })
	if r.status != 200 {
		t.Fatalf("the slow upload: %d %s", r.status, r.raw)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("the upload took %s: it did not outlast the timeouts", took)
	}
	if bi := waitReady(t, e.lh, e.ns, "slow", map[string]string{otherDisk: disks[otherDisk]}, ""); bi.Status.Checksum != sum {
		t.Fatalf("checksum %s, want %s", bi.Status.Checksum, sum)
	}
	// An ordinary request on the same server still answers.
	e.call(t, "GET", fmt.Sprintf("/v1/backingimages/%s", "slow"), "").expect(t, 200)
}
