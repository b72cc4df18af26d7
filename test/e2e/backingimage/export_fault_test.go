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

// TestBackingImageExportSurvivesADetachMidway: a volume detached while it
// is exported fails the export with the reason; the export then waits for
// the volume, and once it is attached again reads the same snapshot to
// the end: the file holds what the volume held when the export began.
func TestBackingImageExportSurvivesADetachMidway(t *testing.T) {
	e, disks, _, _ := framework.TwoDiskAPIEnv(t)
	// 8 GiB, nearly empty: the export lasts several data source polls (3 s
	// each; it hashes the zeros), long enough to see it in progress and to
	// detach the volume midway. (At 2 GiB an export could end between two
	// polls on a quiet machine and never be seen in progress.)
	e.Call(t, "POST", "/v1/volumes", `{"name":"big","size":"8Gi","numberOfReplicas":1}`).Expect(t, 200)
	endpoint := e.AttachVolume(t, "big")
	framework.QemuIO(t, endpoint, "write -P 0x77 0 1M", "write -P 0x99 2047M 1M", "flush")

	e.CreateExportImage(t, "from-big", "big", longhorn.ExportTypeRaw)
	bidsStatus := func() longhorn.BackingImageDataSourceStatus {
		bids, err := e.LH.LonghornV1beta2().BackingImageDataSources(e.NS).Get(context.Background(), "from-big", metav1.GetOptions{})
		if err != nil {
			return longhorn.BackingImageDataSourceStatus{} // not created yet
		}
		return bids.Status
	}
	framework.Eventually(t, 60*time.Second, "the export is in progress", func() (bool, error) {
		return bidsStatus().CurrentState == longhorn.BackingImageStateInProgress, nil
	})
	e.Call(t, "POST", "/v1/volumes/big?action=detach", "").Expect(t, 200)
	var failure string
	framework.Eventually(t, 60*time.Second, "the export fails with the reason, or ends first", func() (bool, error) {
		st := bidsStatus()
		if st.CurrentState == longhorn.BackingImageStateReadyForTransfer {
			t.Skip("the export ended before the detach took effect; nothing to recover from on a machine this fast")
		}
		failure = st.Message
		return st.CurrentState == longhorn.BackingImageStateFailed, nil
	})
	if !strings.Contains(failure, "export snapshot bi-from-big-") || !strings.Contains(failure, "volume big") {
		t.Fatalf("the failed export does not say what failed: %q", failure)
	}
	t.Logf("the export failed with: %s", failure)
	e.WaitVolumeFor(t, 60*time.Second, "big", "big detached", func(v map[string]any) bool { return v["state"] == "detached" })
	framework.Eventually(t, 60*time.Second, "the export waits for the volume again", func() (bool, error) {
		st := bidsStatus()
		return st.CurrentState == longhorn.BackingImageStatePending && strings.Contains(st.Message, "the volume is not attached"), nil
	})

	e.AttachVolume(t, "big")
	bi, disk := e.WaitImageFile(t, "from-big", longhorn.BackingImageStateReady, "")
	if bi.Status.Size != 8<<30 {
		t.Fatalf("the export's size is %d, want 8 GiB", bi.Status.Size)
	}
	f, err := os.Open(filepath.Join(backingimage.FileFolder(disks[disk], "from-big", bi.Status.UUID), backingimage.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []struct {
		off     int64
		pattern byte
	}{{0, 0x77}, {2047 << 20, 0x99}, {1 << 30, 0}} {
		got := make([]byte, 1<<20)
		if _, err := f.ReadAt(got, w.off); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{w.pattern}, 1<<20)) {
			t.Fatalf("the file at %d does not hold what the volume did (%v)", w.off, err)
		}
	}
	// One snapshot for the export, taken once and read again after the
	// detach.
	list := e.Call(t, "POST", "/v1/volumes/big?action=snapshotList", "").Expect(t, 200)
	taken := 0
	for _, s := range list.Body["data"].([]any) {
		if strings.HasPrefix(s.(map[string]any)["name"].(string), "bi-from-big-") {
			taken++
		}
	}
	if taken != 1 {
		t.Fatalf("the volume has %d snapshots for the export, want the one taken before the detach", taken)
	}
}
