//go:build e2e

package csi

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// readySnapshot calls CreateSnapshot as the external-snapshotter does,
// again until the answer is ready to use, and returns that answer.
func readySnapshot(t *testing.T, cs csipb.ControllerClient, req *csipb.CreateSnapshotRequest, timeout time.Duration) *csipb.Snapshot {
	t.Helper()
	var snap *csipb.Snapshot
	framework.Eventually(t, timeout, "CSI snapshot "+req.Name+" ready to use", func() (bool, error) {
		resp, err := cs.CreateSnapshot(context.Background(), req)
		if err != nil {
			return false, err
		}
		snap = resp.GetSnapshot()
		return snap.GetReadyToUse(), nil
	})
	return snap
}

// TestCSIBackupClassModeAndLabels: a bak VolumeSnapshotClass's
// backupMode reaches the backup (its record in the target says full or
// incremental, as the engine took it), and its other parameters are the
// backup's labels, as Longhorn's driver makes them; a backupMode that is
// neither, or a label the manager keeps for itself, is InvalidArgument
// naming the parameter, and no backup is made.
func TestCSIBackupClassModeAndLabels(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	cs := csiController(t, e)
	ctx := context.Background()
	e.SetBackupTarget(t, "file://"+t.TempDir())
	vol, err := cs.CreateVolume(ctx, createRequest("pvc-bak-modes", 16<<20, map[string]string{"numberOfReplicas": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	volume := vol.GetVolume().GetVolumeId()
	endpoint := e.AttachedContentEndpoint(t, volume)
	framework.QemuIO(t, endpoint, "write -P 0x3c 0 3M", "flush")
	api := client.NewClient(e.Base+"/v1", 0)

	backupOf := func(s *csipb.Snapshot) *client.Backup {
		t.Helper()
		h := strings.TrimPrefix(s.GetSnapshotId(), "bak://"+volume+"/")
		if h == s.GetSnapshotId() {
			t.Fatalf("snapshot ID %q is no bak:// handle of %s", s.GetSnapshotId(), volume)
		}
		b, err := api.Backup(ctx, volume, h)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for i, c := range []struct {
		name     string
		params   map[string]string
		mode     string
		labels   map[string]string
		noLabels []string
	}{
		// The first backup finds none of its blocks in the target: full
		// whatever the class says.
		{"bak-first", map[string]string{"type": "bak"}, "full", map[string]string{"type": "bak"}, []string{"backupMode"}},
		// Nothing changed since: incremental takes what is there.
		{"bak-incremental", map[string]string{"type": "bak", "backupMode": "incremental", "team": "db", "example.com/tier": "gold"}, "incremental",
			map[string]string{"type": "bak", "backupMode": "incremental", "team": "db", "example.com/tier": "gold"}, nil},
		// Asked full, it uploads every block again though the target
		// holds them: the record says full only when asked so.
		{"bak-full", map[string]string{"type": "bak", "backupMode": "full"}, "full", map[string]string{"type": "bak", "backupMode": "full"}, []string{"team"}},
		{"bak-default-again", map[string]string{}, "incremental", map[string]string{"type": "bak"}, []string{"backupMode"}},
	} {
		s := readySnapshot(t, cs, &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: c.name, Parameters: c.params}, 60*time.Second)
		b := backupOf(s)
		if b.BackupMode != c.mode {
			t.Errorf("%d %s (%v): backupMode %q, want %q", i, c.name, c.params, b.BackupMode, c.mode)
		}
		for k, v := range c.labels {
			if b.Labels[k] != v {
				t.Errorf("%s: label %s is %q, want %q (labels %v)", c.name, k, b.Labels[k], v, b.Labels)
			}
		}
		for _, k := range c.noLabels {
			if _, ok := b.Labels[k]; ok {
				t.Errorf("%s: has label %s (labels %v), which its class does not set", c.name, k, b.Labels)
			}
		}
	}

	before, err := api.AllBackups(ctx, volume)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what   string
		params map[string]string
		names  string
	}{
		{"a backupMode neither full nor incremental", map[string]string{"type": "bak", "backupMode": "differential"}, `parameters.backupMode: "differential" is not full`},
		{"a recurring job's label", map[string]string{"type": "bak", "RecurringJob": "daily"}, "parameters.RecurringJob: a label the manager keeps for itself"},
		{"a label the manager keeps", map[string]string{"type": "bak", "longhorn.io/volume-uid": "x"}, "parameters.longhorn.io/volume-uid"},
		{"an empty label", map[string]string{"type": "bak", "team": ""}, "parameters.team"},
	} {
		wantCode(t, c.what, codes.InvalidArgument, c.names, func() error {
			_, err := cs.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: "bak-refused", Parameters: c.params})
			return err
		})
	}
	after, err := api.AllBackups(ctx, volume)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("refused CreateSnapshots changed the backups: %d before, %d after", len(before), len(after))
	}
	if _, err := api.SnapshotObject(ctx, volume, "bak-refused"); !client.IsNotFound(err) {
		t.Errorf("a refused CreateSnapshot took a snapshot: %v", err)
	}
}

// TestCSIBackingImageSnapshots: a VolumeSnapshotClass of type bi exports
// a detached volume as a backing image (the driver attaches it for the
// export and detaches it after), answering Longhorn's bi:// handle, ready
// once the image's file is; the image holds the volume's bytes; a volume
// made from the handle is on that image and reads them; ListSnapshots
// answers the handle. The same name of another volume, or of another
// export type, is AlreadyExists; bad parameters and handles are refused
// naming them. DeleteSnapshot is refused while a volume uses the image,
// then deletes it, and deletes no image that is not the handle's.
func TestCSIBackingImageSnapshots(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t, framework.WithTestServers)
	cs := csiController(t, e)
	ctx := context.Background()
	const size = 16 << 20
	vol, err := cs.CreateVolume(ctx, createRequest("pvc-bi-src", size, map[string]string{"numberOfReplicas": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	volume := vol.GetVolume().GetVolumeId()
	endpoint := e.AttachedContentEndpoint(t, volume)
	framework.QemuIO(t, endpoint, "write -P 0x6b 0 1M", "write -P 0x19 9M 512k", "flush")
	want := make([]byte, size)
	framework.Fill(want, 0x6b, 0, 1<<20)
	framework.Fill(want, 0x19, 9<<20, 512<<10)
	sum := sha512.Sum512(want)
	e.Call(t, "POST", "/v1/volumes/"+volume+"?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, volume, "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	api := client.NewClient(e.Base+"/v1", 0)

	const name = "snapshot-bi-1"
	handle := "bi://backing?backingImage=" + name + "&backingImageDataSourceType=export-from-volume&export-type=raw&volume-name=" + volume
	req := &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: name, Parameters: map[string]string{"type": "bi"}}
	first, err := cs.CreateSnapshot(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if s := first.GetSnapshot(); s.GetSnapshotId() != handle || s.GetSourceVolumeId() != volume || s.GetSizeBytes() != size {
		t.Fatalf("CreateSnapshot answered %v; want %s of %s, %d bytes", s, handle, volume, size)
	}
	if !first.GetSnapshot().GetReadyToUse() {
		// The export reads the volume through its engine: the driver
		// attached it for it.
		v, err := api.Volume(ctx, volume)
		if err != nil {
			t.Fatal(err)
		}
		if v.NodeID == "" && !readyNow(t, api, name) {
			t.Errorf("the export of detached %s is under way, and the volume is not attached for it (state %s)", volume, v.State)
		}
	}
	s := readySnapshot(t, cs, req, 3*time.Minute)
	if s.GetSnapshotId() != handle {
		t.Fatalf("the ready answer names %s, want %s", s.GetSnapshotId(), handle)
	}
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bi.Spec.SourceType != longhorn.BackingImageDataSourceTypeExportFromVolume || bi.Spec.SourceParameters[longhorn.DataSourceParameterVolumeName] != volume ||
		bi.Spec.SourceParameters[longhorn.DataSourceParameterExportType] != longhorn.ExportTypeRaw {
		t.Errorf("backing image %s: %s %v, want a raw export of %s", name, bi.Spec.SourceType, bi.Spec.SourceParameters, volume)
	}
	if bi.Status.Checksum != hex.EncodeToString(sum[:]) {
		t.Errorf("backing image %s has checksum %s, not the volume's bytes' %s", name, bi.Status.Checksum, hex.EncodeToString(sum[:]))
	}
	// Exported, the volume the driver attached is detached again.
	e.WaitVolumeFor(t, 30*time.Second, volume, "detached after its export", func(v map[string]any) bool {
		return v["state"] == "detached" && v["currentNodeID"] == ""
	})
	list, err := cs.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: handle})
	if err != nil || len(list.GetEntries()) != 1 || !list.GetEntries()[0].GetSnapshot().GetReadyToUse() || list.GetEntries()[0].GetSnapshot().GetSourceVolumeId() != volume {
		t.Errorf("ListSnapshots of %s: %v, %v; want it, ready", handle, list, err)
	}

	// The same name again: the same image; of another volume or export
	// type: AlreadyExists.
	if again, err := cs.CreateSnapshot(ctx, req); err != nil || again.GetSnapshot().GetSnapshotId() != handle || !again.GetSnapshot().GetReadyToUse() {
		t.Errorf("CreateSnapshot again: %v, %v", again, err)
	}
	other, err := cs.CreateVolume(ctx, createRequest("pvc-bi-other", size, map[string]string{"numberOfReplicas": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the name of another volume's bi snapshot", codes.AlreadyExists, "is not the raw export of volume "+other.GetVolume().GetVolumeId(), func() error {
		_, err := cs.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: other.GetVolume().GetVolumeId(), Name: name, Parameters: map[string]string{"type": "bi"}})
		return err
	})
	wantCode(t, "the name in another export type", codes.AlreadyExists, "is not the qcow2 export", func() error {
		_, err := cs.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: name, Parameters: map[string]string{"type": "bi", "exportType": "qcow2"}})
		return err
	})
	for _, c := range []struct {
		what   string
		params map[string]string
		names  string
	}{
		{"an export type neither raw nor qcow2", map[string]string{"type": "bi", "exportType": "vmdk"}, `parameters.exportType: "vmdk" is not raw or qcow2`},
		{"a disk selector", map[string]string{"type": "bi", "diskSelector": "ssd"}, "parameters.diskSelector"},
		{"a label", map[string]string{"type": "bi", "team": "db"}, "parameters.team: not a parameter of driver.longhorn.io's VolumeSnapshotClass of type bi"},
	} {
		wantCode(t, c.what, codes.InvalidArgument, c.names, func() error {
			_, err := cs.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{SourceVolumeId: volume, Name: "bi-refused", Parameters: c.params})
			return err
		})
	}
	if _, err := api.BackingImage(ctx, "bi-refused"); !client.IsNotFound(err) {
		t.Errorf("a refused CreateSnapshot made a backing image: %v", err)
	}

	// A volume from the handle: on the image, holding the source's bytes.
	from := createRequest("pvc-from-bi", size, map[string]string{"numberOfReplicas": "1"})
	from.VolumeContentSource = snapshotContent(handle)
	if _, err := cs.CreateVolume(ctx, from); err != nil {
		t.Fatalf("CreateVolume from %s: %v", handle, err)
	}
	if again, err := cs.CreateVolume(ctx, from); err != nil || again.GetVolume().GetVolumeId() != "pvc-from-bi" {
		t.Errorf("CreateVolume from %s again: %v, %v", handle, again, err)
	}
	if v, err := api.Volume(ctx, "pvc-from-bi"); err != nil || v.BackingImage != name {
		t.Fatalf("pvc-from-bi: %+v, %v; want it on backing image %s", v, err, name)
	}
	if got := e.AttachedContent(t, "pvc-from-bi"); !bytes.Equal(got, want) {
		t.Error("the volume made from the bi snapshot does not hold its source's bytes")
	}
	before := e.VolumeNames(t)
	for _, c := range []struct {
		what   string
		name   string
		source *csipb.VolumeContentSource
		code   codes.Code
		names  string
	}{
		{"another source for its name", "pvc-from-bi", volumeContent(volume), codes.AlreadyExists, "made from backing image " + name},
		{"no such image", "pvc-bi-refused", snapshotContent(strings.Replace(handle, name, "nope", 1)), codes.NotFound, "no backing image nope exported (raw) from volume " + volume},
		{"the image is not that volume's export", "pvc-bi-refused", snapshotContent(strings.Replace(handle, "volume-name="+volume, "volume-name=pvc-bi-other", 1)), codes.NotFound, "no backing image " + name + " exported (raw) from volume pvc-bi-other"},
		{"not Longhorn's bi handle", "pvc-bi-refused", snapshotContent("bi://" + volume + "/" + name), codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id"},
		{"a bi handle of another source", "pvc-bi-refused", snapshotContent(strings.Replace(handle, "export-from-volume", "download", 1)), codes.InvalidArgument, "backingImageDataSourceType"},
	} {
		req := createRequest(c.name, size, map[string]string{"numberOfReplicas": "1"})
		req.VolumeContentSource = c.source
		wantCode(t, c.what, c.code, c.names, func() error { _, err := cs.CreateVolume(ctx, req); return err })
	}
	if after := e.VolumeNames(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused requests changed the volumes: %v, then %v", before, after)
	}

	// A handle whose image is not the export it names deletes nothing.
	e.CreateExportImage(t, "not-this-export", volume, longhorn.ExportTypeRaw)
	notIt := "bi://backing?backingImage=not-this-export&backingImageDataSourceType=export-from-volume&export-type=raw&volume-name=pvc-bi-other"
	if _, err := cs.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: notIt}); err != nil {
		t.Errorf("DeleteSnapshot of %s: %v", notIt, err)
	}
	if _, err := api.BackingImage(ctx, "not-this-export"); err != nil {
		t.Errorf("DeleteSnapshot of a handle naming another volume's export deleted the image of that name: %v", err)
	}

	// In use by pvc-from-bi, the image stays; once that volume is gone,
	// it goes.
	wantCode(t, "DeleteSnapshot of an image a volume uses", codes.FailedPrecondition, "pvc-from-bi", func() error {
		_, err := cs.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: handle})
		return err
	})
	if _, err := api.BackingImage(ctx, name); err != nil {
		t.Fatalf("the image in use after a refused DeleteSnapshot: %v", err)
	}
	if _, err := cs.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: "pvc-from-bi"}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "pvc-from-bi and its replicas gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "pvc-from-bi", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
	framework.Eventually(t, 60*time.Second, "DeleteSnapshot of "+handle, func() (bool, error) {
		_, err := cs.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: handle})
		if err != nil {
			t.Logf("DeleteSnapshot: %v", err)
		}
		return err == nil, nil
	})
	if _, err := api.BackingImage(ctx, name); !client.IsNotFound(err) {
		t.Errorf("backing image %s after its DeleteSnapshot: %v, want not found", name, err)
	}
	if _, err := cs.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: handle}); err != nil {
		t.Errorf("DeleteSnapshot again: %v", err)
	}
	if list, err := cs.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{SnapshotId: handle}); err != nil || len(list.GetEntries()) != 0 {
		t.Errorf("ListSnapshots of the deleted %s: %v, %v; want none", handle, list, err)
	}
}

// readyNow says whether the backing image has a ready file already (an
// export fast enough to end before the answer was read).
func readyNow(t *testing.T, api *client.Client, name string) bool {
	t.Helper()
	bi, err := api.BackingImage(context.Background(), name)
	return err == nil && bi.ReadyFile()
}
