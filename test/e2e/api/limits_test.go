//go:build e2e

package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/api"
	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestAPIUploadOutlivesServerTimeouts: with read and write timeouts of a
// second, an upload whose body takes longer, but keeps coming, is still
// taken whole; only a body that stops for UploadIdleTimeout would be cut.
func TestAPIUploadOutlivesServerTimeouts(t *testing.T) {
	e, disks, _, otherDisk := framework.TwoDiskAPIEnv(t, func(o *app.DaemonOptions) {
		o.APITimeouts = api.Timeouts{ReadTimeout: time.Second, WriteTimeout: time.Second, UploadIdleTimeout: 5 * time.Second}
	})
	content, sum := framework.RandomImage(t, 1<<20)
	body, ct := framework.MultipartUpload(t, content)
	e.Call(t, "POST", "/v1/backingimages", `{"name":"slow","sourceType":"upload","disks":["`+otherDisk+`"]}`).Expect(t, 200)
	start := time.Now()
	r := e.UploadInTwo(t, "slow", len(content), body, ct, func() { time.Sleep(2500 * time.Millisecond) })
	if r.Status != 200 {
		t.Fatalf("the slow upload: %d %s", r.Status, r.Raw)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("the upload took %s: it did not outlast the timeouts", took)
	}
	if bi := framework.WaitReady(t, e.LH, e.NS, "slow", map[string]string{otherDisk: disks[otherDisk]}, ""); bi.Status.Checksum != sum {
		t.Fatalf("checksum %s, want %s", bi.Status.Checksum, sum)
	}
	// An ordinary request on the same server still answers.
	e.Call(t, "GET", fmt.Sprintf("/v1/backingimages/%s", "slow"), "").Expect(t, 200)
}
