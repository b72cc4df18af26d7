package app

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
	"github.com/cadence-storage/longhorn-manager/types"
)

// createExportImage creates an export-from-volume backing image with no
// disk: the controller places it on the volume's engine's node.
func (e *apiEnv) createExportImage(t *testing.T, name, volume, exportType string) {
	t.Helper()
	if _, err := e.lh.LonghornV1beta2().BackingImages(e.ns).Create(context.Background(), &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeExportFromVolume, SourceParameters: map[string]string{
			longhorn.DataSourceParameterVolumeName: volume, longhorn.DataSourceParameterExportType: exportType}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitImageFile waits until one disk's file of the image is in state
// (with a message containing msg) and answers the image and that disk.
func (e *apiEnv) waitImageFile(t *testing.T, name string, state longhorn.BackingImageState, msg string) (*longhorn.BackingImage, string) {
	t.Helper()
	var bi *longhorn.BackingImage
	var disk string
	// Generous: an export of several GiB hashes every byte, and the suite
	// runs two packages at once on two cores.
	eventually(t, 180*time.Second, "a file of "+name+" is "+string(state)+" saying "+msg, func() (bool, error) {
		var err error
		bi, err = e.lh.LonghornV1beta2().BackingImages(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for d, f := range bi.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateFailed && state != longhorn.BackingImageStateFailed {
				t.Fatalf("the file of %s on disk %s failed: %s", name, d, f.Message)
			}
			if f.State == state && strings.Contains(f.Message, msg) {
				disk = d
				return true, nil
			}
		}
		return false, nil
	})
	return bi, disk
}

func (e *apiEnv) attachVolume(t *testing.T, name string) string {
	t.Helper()
	e.call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolumeFor(t, 120*time.Second, name, name+" attached", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	return v["endpoint"].(string)
}

// TestBackingImageExportedFromAVolume: a backing image exported raw from
// an attached volume is the volume's bytes (checksum and all), a new
// volume on it reads them; a qcow2 export holds the same image; the
// export reads a snapshot the controller took, which the engine keeps
// from deletion meanwhile; a missing volume fails with the reason, and a
// detached one waits until it is attached.
func TestBackingImageExportedFromAVolume(t *testing.T) {
	e, disks, _, _ := twoDiskAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).expect(t, 200)
	endpoint := e.attachVolume(t, "src")
	qemuIO(t, endpoint, "write -P 0x5a 0 1M", "write -P 0xc3 3M 64k", "write -P 0x11 8188k 4k", "flush")
	want := deviceContent(t, endpoint)
	if len(want) != 8<<20 || want[0] != 0x5a || want[3<<20] != 0xc3 || want[8<<20-1] != 0x11 {
		t.Fatalf("the source volume reads %d bytes, not what was written", len(want))
	}
	sum := sha512.Sum512(want)

	e.createExportImage(t, "from-src", "src", longhorn.ExportTypeRaw)
	raw, rawDisk := e.waitImageFile(t, "from-src", longhorn.BackingImageStateReady, "")
	if raw.Status.Checksum != hex.EncodeToString(sum[:]) || raw.Status.Size != 8<<20 {
		t.Fatalf("the raw export has checksum %s and size %d, want the volume's %s and %d", raw.Status.Checksum, raw.Status.Size, hex.EncodeToString(sum[:]), 8<<20)
	}
	rawFile := filepath.Join(backingimage.FileFolder(disks[rawDisk], "from-src", raw.Status.UUID), backingimage.DataFile)

	// The export read a snapshot the controller took, labelled for it.
	snapName := "bi-from-src-" + raw.Status.UUID
	eventually(t, 30*time.Second, "the export's snapshot is listed with its label", func() (bool, error) {
		r := e.call(t, "POST", "/v1/volumes/src?action=snapshotGet", `{"name":"`+snapName+`"}`)
		labels, _ := r.body["labels"].(map[string]any)
		return r.status == 200 && labels[types.LabelExportingBackingImage] == "from-src", nil
	})

	// The engine holds the snapshot for a while after the export's last
	// read: a delete now is refused with the reason.
	r := e.call(t, "POST", "/v1/volumes/src?action=snapshotDelete", `{"name":"`+snapName+`"}`)
	if r.status != 400 || !strings.Contains(r.raw, "is held until") || !strings.Contains(r.raw, "export") {
		t.Fatalf("deleting the snapshot just exported: %d %s", r.status, r.raw)
	}
	// kubectl delete of its object waits too, and its status says for what.
	// The object comes with the Engine status, mirrored at most every 5 s.
	eventually(t, 30*time.Second, "the export's snapshot has its object", func() (bool, error) {
		_, err := e.snapshotObject(t, snapName)
		return err == nil, nil
	})
	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", snapName, "--wait=false")
	eventually(t, 20*time.Second, "the held snapshot's status says what its deletion waits for", func() (bool, error) {
		s, err := e.snapshotObject(t, snapName)
		return err == nil && s.DeletionTimestamp != nil && !s.Status.ReadyToUse && !s.Status.MarkRemoved &&
			strings.Contains(s.Status.Error, "the deletion waits") && strings.Contains(s.Status.Error, "is held until"), nil
	})

	// A volume on the exported image reads the source's bytes.
	e.call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"backingImage":"from-src"}`).expect(t, 200)
	if got := deviceContent(t, e.attachVolume(t, "copy")); !bytes.Equal(got, want) {
		t.Fatal("a volume on the exported image does not read the source volume's bytes")
	}

	// qcow2: the same image in another format.
	e.createExportImage(t, "from-src-qcow2", "src", longhorn.ExportTypeQCOW2)
	q, qDisk := e.waitImageFile(t, "from-src-qcow2", longhorn.BackingImageStateReady, "")
	qFile := filepath.Join(backingimage.FileFolder(disks[qDisk], "from-src-qcow2", q.Status.UUID), backingimage.DataFile)
	if out, err := exec.Command("qemu-img", "info", "--output=json", qFile).CombinedOutput(); err != nil || !strings.Contains(string(out), `"format": "qcow2"`) {
		t.Fatalf("the qcow2 export is no qcow2 image: %v: %s", err, out)
	}
	if out, err := exec.Command("qemu-img", "compare", "-f", "raw", "-F", "qcow2", rawFile, qFile).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img compare of the raw and qcow2 exports: %v: %s", err, out)
	}

	// A volume that does not exist: failed, saying so.
	e.createExportImage(t, "from-nothing", "nothing", longhorn.ExportTypeRaw)
	e.waitImageFile(t, "from-nothing", longhorn.BackingImageStateFailed, `sourceParameters.volume-name "nothing": the volume does not exist`)

	// A detached volume: the export waits, then goes on once attached. The
	// volume is large enough (2 GiB, empty: the engine sends nothing, the
	// data source hashes the zeros) for the export to last several polls,
	// and its progress shows in the data source's status as it goes.
	e.call(t, "POST", "/v1/volumes", `{"name":"later","size":"2Gi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolumeFor(t, 60*time.Second, "later", "later detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.createExportImage(t, "from-later", "later", longhorn.ExportTypeRaw)
	e.waitImageFile(t, "from-later", longhorn.BackingImageStatePending, "the volume is not attached")
	e.attachVolume(t, "later")
	progress := map[int]bool{}
	var done longhorn.BackingImageDataSourceStatus
	var began time.Time
	eventually(t, 120*time.Second, "the export of later is ready for transfer", func() (bool, error) {
		bids, err := e.lh.LonghornV1beta2().BackingImageDataSources(e.ns).Get(context.Background(), "from-later", metav1.GetOptions{})
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
