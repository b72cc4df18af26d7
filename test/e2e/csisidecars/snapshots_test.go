//go:build e2e

package csisidecars

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	lhtypes "github.com/cadence-storage/longhorn-manager/types"
)

// TestCSIVolumeSnapshots runs Kubernetes' snapshot controller and
// csi-snapshotter, built from external-snapshotter's module, with the
// provisioner, against the driver on a real manager and control plane:
// a VolumeSnapshot of a `snap` class is a Longhorn snapshot, of a `bak`
// class a backup holding the volume's bytes, each readyToUse once
// complete and deleted with its VolumeSnapshot; a VolumeSnapshotContent
// made by hand from a backup's handle becomes readyToUse; a class with an
// unknown type, or a backup with no backup target, is refused on the
// VolumeSnapshot and makes nothing.
func TestCSIVolumeSnapshots(t *testing.T) {
	e := newSnapshotEnv(t)
	ctx := context.Background()
	sc := e.storageClass(t, "plain", map[string]string{})
	e.claim(t, "data", sc)
	pv := e.waitBound(t, "data")
	volume := pv.Spec.CSI.VolumeHandle
	snapClass := e.snapshotClass(t, "snap", map[string]any{"type": "snap"})
	bakClass := e.snapshotClass(t, "bak", map[string]any{"type": "bak"})

	// Bytes written through the volume's NBD export, as a pod would.
	e.Call(t, "POST", "/v1/volumes/"+volume+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, volume, "attached with its endpoint", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x7e 0 1M", "write -P 0x2c 5M 512k", "flush")
	want := make([]byte, 16<<20)
	copy(want, bytes.Repeat([]byte{0x7e}, 1<<20))
	copy(want[5<<20:], bytes.Repeat([]byte{0x2c}, 512<<10))

	snapshotObjects := func() []string {
		list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(ctx, metav1.ListOptions{LabelSelector: lhtypes.LabelVolume + "=" + volume})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return names
	}

	t.Run("bad input is refused on the VolumeSnapshot and makes nothing", func(t *testing.T) {
		before := snapshotObjects()
		bad := e.snapshotClass(t, "clone", map[string]any{"type": "clone"})
		e.volumeSnapshot(t, "unknown-type", bad, "data")
		msg := e.snapshotFailed(t, "unknown-type")
		if !strings.Contains(msg, "InvalidArgument") || !strings.Contains(msg, "parameters.type") {
			t.Errorf("VolumeSnapshot error %q: want the driver's InvalidArgument naming parameters.type", msg)
		}
		if event := e.creationFailedEvent(t, "unknown-type"); !strings.Contains(event, "parameters.type") {
			t.Errorf("the content's SnapshotCreationFailed event %q does not name parameters.type", event)
		}
		// No backup target is set yet.
		e.volumeSnapshot(t, "no-target", bakClass, "data")
		msg = e.snapshotFailed(t, "no-target")
		if !strings.Contains(msg, "FailedPrecondition") || !strings.Contains(msg, "backup-target") {
			t.Errorf("VolumeSnapshot error %q: want the driver's FailedPrecondition naming the backup-target setting", msg)
		}
		if event := e.creationFailedEvent(t, "no-target"); !strings.Contains(event, "backup-target") {
			t.Errorf("the content's SnapshotCreationFailed event %q does not name the backup-target setting", event)
		}
		if after := snapshotObjects(); strings.Join(after, ",") != strings.Join(before, ",") {
			t.Errorf("Longhorn snapshots of %s: %v before, %v after the refused VolumeSnapshots", volume, before, after)
		}
		for _, name := range []string{"unknown-type", "no-target"} {
			e.deleteVolumeSnapshot(t, name)
		}
	})

	t.Run("snap: a Longhorn snapshot, deleted with its VolumeSnapshot", func(t *testing.T) {
		e.volumeSnapshot(t, "snap-1", snapClass, "data")
		handle, size := e.snapshotReady(t, "snap-1")
		name, ok := strings.CutPrefix(handle, "snap://"+volume+"/")
		if !ok {
			t.Fatalf("handle %q: want snap://%s/<snapshot>", handle, volume)
		}
		if size != "16Mi" {
			t.Errorf("restoreSize %q: want the volume's 16Mi", size)
		}
		snap, err := e.LH.LonghornV1beta2().Snapshots(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Snapshot object %s: %v", name, err)
		}
		if snap.Spec.Volume != volume || !snap.Status.ReadyToUse || snap.Status.Size != 1<<20+512<<10 {
			t.Errorf("Snapshot %s: volume %s, ready %v, %d bytes: want %s's, ready, the 1.5 MiB written", name, snap.Spec.Volume, snap.Status.ReadyToUse, snap.Status.Size, volume)
		}
		e.deleteVolumeSnapshot(t, "snap-1")
		framework.Eventually(t, sidecarWait, "Snapshot "+name+" deleted", func() (bool, error) {
			_, err := e.LH.LonghornV1beta2().Snapshots(e.NS).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})

	// The driver attaches a detached volume to back it up, and detaches it
	// once the backup has ended.
	e.Call(t, "POST", "/v1/volumes/"+volume+"?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, volume, "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.SetBackupTarget(t, "file://"+t.TempDir())
	var staticBackup string

	t.Run("bak: a backup holding the volume's bytes, deleted with its VolumeSnapshot", func(t *testing.T) {
		e.volumeSnapshot(t, "bak-1", bakClass, "data")
		handle, size := e.snapshotReady(t, "bak-1")
		backup, ok := strings.CutPrefix(handle, "bak://"+volume+"/")
		if !ok {
			t.Fatalf("handle %q: want bak://%s/<backup>", handle, volume)
		}
		if size != "16Mi" {
			t.Errorf("restoreSize %q: want the volume's 16Mi", size)
		}
		url := e.CompletedBackupURL(t, backup)
		e.WaitVolume(t, volume, "detached again after its backup", func(v map[string]any) bool { return v["state"] == "detached" && v["nodeID"] == "" })

		// The backup holds the bytes: a volume restored from it reads them.
		e.Call(t, "POST", "/v1/volumes", `{"name":"restored","size":"16Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
		framework.Eventually(t, 30*time.Second, "restore done", func() (bool, error) {
			vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "restored", metav1.GetOptions{})
			return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
		})
		e.Call(t, "POST", "/v1/volumes/restored?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
		r := e.WaitVolume(t, "restored", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
		if got := framework.DeviceContent(t, r["endpoint"].(string)); !bytes.Equal(got, want) {
			t.Error("the volume restored from the backup does not read the bytes written before the VolumeSnapshot")
		}
		// A backup to restore by hand below, as one from another cluster
		// would be: known only from the target's listing.
		e.Call(t, "POST", "/v1/volumes/restored?action=snapshotCreate", `{"name":"by-hand"}`).Expect(t, 200)
		staticBackup = e.Call(t, "POST", "/v1/volumes/restored?action=snapshotBackup", `{"name":"by-hand"}`).Expect(t, 200).Body["name"].(string)
		e.CompletedBackupURL(t, staticBackup)

		e.deleteVolumeSnapshot(t, "bak-1")
		framework.Eventually(t, sidecarWait, "backup "+backup+" deleted from the target", func() (bool, error) {
			_, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(ctx, backup, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		e.Call(t, "POST", "/v1/backupvolumes/"+volume+"?action=backupGet", `{"name":"`+backup+`"}`).Expect(t, 404)
	})

	t.Run("a VolumeSnapshotContent made by hand from a backup's handle", func(t *testing.T) {
		if staticBackup == "" {
			t.Skip("no backup was made")
		}
		content := e.prefix + "-static"
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotContent",
			"metadata": map[string]any{"name": content},
			"spec": map[string]any{
				"driver": "driver.longhorn.io", "deletionPolicy": "Retain", "volumeSnapshotClassName": bakClass,
				"source":            map[string]any{"snapshotHandle": "bak://restored/" + staticBackup},
				"volumeSnapshotRef": map[string]any{"name": "static", "namespace": e.NS},
			},
		}}
		if _, err := e.dyn.Resource(framework.VolumeSnapshotContents).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		vs := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
			"metadata": map[string]any{"name": "static"},
			"spec":     map[string]any{"source": map[string]any{"volumeSnapshotContentName": content}},
		}}
		if _, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Create(ctx, vs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		handle, size := e.snapshotReady(t, "static")
		if handle != "bak://restored/"+staticBackup || size != "16Mi" {
			t.Errorf("static content: handle %q, restoreSize %q; want bak://restored/%s, 16Mi", handle, size, staticBackup)
		}
		// Retain: deleting them leaves the backup.
		if err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Delete(ctx, "static", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, sidecarWait, "VolumeSnapshot static gone", func() (bool, error) {
			_, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(ctx, "static", metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		if err := e.dyn.Resource(framework.VolumeSnapshotContents).Delete(ctx, content, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, sidecarWait, "VolumeSnapshotContent "+content+" gone", func() (bool, error) {
			_, err := e.dyn.Resource(framework.VolumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
		e.Call(t, "POST", "/v1/backupvolumes/restored?action=backupGet", `{"name":"`+staticBackup+`"}`).Expect(t, 200)
	})
}
