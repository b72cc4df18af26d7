//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestBackingImageExportedFromAVolume: a backing image exported raw from
// an attached volume is the volume's bytes (checksum and all), a new
// volume on it reads them; a qcow2 export holds the same image; the
// export reads a snapshot the controller took, which the engine keeps
// from deletion meanwhile; a missing volume fails with the reason, and a
// detached one waits until it is attached.
func TestBackingImageExportedFromAVolume(t *testing.T) {
	e, disks, _, _ := framework.TwoDiskAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	endpoint := e.AttachVolume(t, "src")
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 1M", "write -P 0xc3 3M 64k", "write -P 0x11 8188k 4k", "flush")
	want := framework.DeviceContent(t, endpoint)
	if len(want) != 8<<20 || want[0] != 0x5a || want[3<<20] != 0xc3 || want[8<<20-1] != 0x11 {
		t.Fatalf("the source volume reads %d bytes, not what was written", len(want))
	}
	sum := sha512.Sum512(want)

	e.CreateExportImage(t, "from-src", "src", longhorn.ExportTypeRaw)
	raw, rawDisk := e.WaitImageFile(t, "from-src", longhorn.BackingImageStateReady, "")
	if raw.Status.Checksum != hex.EncodeToString(sum[:]) || raw.Status.Size != 8<<20 {
		t.Fatalf("the raw export has checksum %s and size %d, want the volume's %s and %d", raw.Status.Checksum, raw.Status.Size, hex.EncodeToString(sum[:]), 8<<20)
	}
	rawFile := filepath.Join(backingimage.FileFolder(disks[rawDisk], "from-src", raw.Status.UUID), backingimage.DataFile)

	// The export read a snapshot the controller took, labelled for it.
	snapName := "bi-from-src-" + raw.Status.UUID
	framework.Eventually(t, 30*time.Second, "the export's snapshot is listed with its label", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/volumes/src?action=snapshotGet", `{"name":"`+snapName+`"}`)
		labels, _ := r.Body["labels"].(map[string]any)
		return r.Status == 200 && labels[types.LabelExportingBackingImage] == "from-src", nil
	})

	// The engine holds the snapshot for a while after the export's last
	// read: a delete now is refused with the reason.
	r := e.Call(t, "POST", "/v1/volumes/src?action=snapshotDelete", `{"name":"`+snapName+`"}`)
	if r.Status != 400 || !strings.Contains(r.Raw, "is held until") || !strings.Contains(r.Raw, "export") {
		t.Fatalf("deleting the snapshot just exported: %d %s", r.Status, r.Raw)
	}
	// kubectl delete of its object waits too, and its status says for what.
	// The object comes with the Engine status, mirrored at most every 5 s.
	framework.Eventually(t, 30*time.Second, "the export's snapshot has its object", func() (bool, error) {
		_, err := e.SnapshotObject(t, snapName)
		return err == nil, nil
	})
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", snapName, "--wait=false")
	framework.Eventually(t, 20*time.Second, "the held snapshot's status says what its deletion waits for", func() (bool, error) {
		s, err := e.SnapshotObject(t, snapName)
		return err == nil && s.DeletionTimestamp != nil && !s.Status.ReadyToUse && !s.Status.MarkRemoved &&
			strings.Contains(s.Status.Error, "the deletion waits") && strings.Contains(s.Status.Error, "is held until"), nil
	})

	// A volume on the exported image reads the source's bytes.
	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"backingImage":"from-src"}`).Expect(t, 200)
	if got := framework.DeviceContent(t, e.AttachVolume(t, "copy")); !bytes.Equal(got, want) {
		t.Fatal("a volume on the exported image does not read the source volume's bytes")
	}

	// qcow2: the same image in another format.
	e.CreateExportImage(t, "from-src-qcow2", "src", longhorn.ExportTypeQCOW2)
	q, qDisk := e.WaitImageFile(t, "from-src-qcow2", longhorn.BackingImageStateReady, "")
	qFile := filepath.Join(backingimage.FileFolder(disks[qDisk], "from-src-qcow2", q.Status.UUID), backingimage.DataFile)
	if out, err := exec.Command("qemu-img", "info", "--output=json", qFile).CombinedOutput(); err != nil || !strings.Contains(string(out), `"format": "qcow2"`) {
		t.Fatalf("the qcow2 export is no qcow2 image: %v: %s", err, out)
	}
	if out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", rawFile, qFile).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare of the raw and qcow2 exports: %v: %s", err, out)
	}

	// A volume that does not exist: failed, saying so.
	e.CreateExportImage(t, "from-nothing", "nothing", longhorn.ExportTypeRaw)
	e.WaitImageFile(t, "from-nothing", longhorn.BackingImageStateFailed, `sourceParameters.volume-name "nothing": the volume does not exist`)

	// A detached volume: the export waits, then goes on once attached. The
	// volume is large enough (2 GiB, empty: the engine sends nothing, the
	// data source hashes the zeros) for the export to last several polls,
	// and its progress shows in the data source's status as it goes.
	e.Call(t, "POST", "/v1/volumes", `{"name":"later","size":"2Gi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolumeFor(t, 60*time.Second, "later", "later detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.CreateExportImage(t, "from-later", "later", longhorn.ExportTypeRaw)
	e.WaitImageFile(t, "from-later", longhorn.BackingImageStatePending, "the volume is not attached")
	e.AttachVolume(t, "later")
	progress := map[int]bool{}
	var done longhorn.BackingImageDataSourceStatus
	var began time.Time
	framework.Eventually(t, 120*time.Second, "the export of later is ready for transfer", func() (bool, error) {
		bids, err := e.LH.LonghornV1beta2().BackingImageDataSources(e.NS).Get(context.Background(), "from-later", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		done = bids.Status
		if began.IsZero() && (done.CurrentState == longhorn.BackingImageStateStarting || done.CurrentState == longhorn.BackingImageStateInProgress) {
			began = time.Now()
		}
		if done.CurrentState == longhorn.BackingImageStateInProgress && done.Progress > 0 && done.Progress < 100 {
			progress[done.Progress] = true
		}
		return done.CurrentState == longhorn.BackingImageStateReadyForTransfer, nil
	})
	// The controller polls the server every 3 s: an export that lasts
	// longer than two polls must have shown its progress (on this
	// machine it lasts about 8 s and shows two or three values).
	if took := time.Since(began); len(progress) == 0 && took > 7*time.Second {
		t.Fatalf("the export took %s, and the data source's status never showed it in progress between 0 and 100%%", took.Round(time.Second))
	}
	// `head -c 2G /dev/zero | sha512sum`
	const zeros2GiB = "0414cac598ebfa08e8e9c6d2544aa414385b9985c5d67d7a8746aa64324c715fa96ff63351016d30dd2b89276252c121c71619f15496b5ca95785d0b25fe4dfd"
	if done.Checksum != zeros2GiB || done.Size != 2<<30 {
		t.Fatalf("the export of an empty 2 GiB volume hashes to %s, size %d", done.Checksum, done.Size)
	}
	t.Logf("progress seen during the export of 2 GiB: %v", progress)
}
