//go:build e2e

package csisidecars

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSIVolumeSnapshotClassTypes: through the real snapshot controller,
// csi-snapshotter and external-provisioner, a bak VolumeSnapshotClass's
// backupMode reaches its backups (a second backup of a full class is
// full, as its record says, where an incremental class's is
// incremental) and its other parameters are their labels; a
// VolumeSnapshot of a bi class is a backing image exported from the
// claim's volume, readyToUse once its file is, with Longhorn's bi://
// handle; a PVC from it is Bound on a volume on that image that reads the
// source's bytes; deleting the VolumeSnapshot (once that PVC is gone)
// deletes the image.
func TestCSIVolumeSnapshotClassTypes(t *testing.T) {
	e := newSnapshotEnv(t, framework.WithTestServers)
	ctx := context.Background()
	sc := e.storageClass(t, "plain", map[string]string{})
	e.claim(t, "data", sc)
	volume := e.waitBound(t, "data").Spec.CSI.VolumeHandle
	e.SetBackupTarget(t, "file://"+t.TempDir())
	endpoint := e.AttachedContentEndpoint(t, volume)
	framework.QemuIO(t, endpoint, "write -P 0x47 0 1M", "write -P 0x48 11M 256k", "flush")
	want := make([]byte, 16<<20)
	framework.Fill(want, 0x47, 0, 1<<20)
	framework.Fill(want, 0x48, 11<<20, 256<<10)
	api := client.NewClient(e.Base+"/v1", 0)

	backupOf := func(vs string) *client.Backup {
		t.Helper()
		handle, _ := e.snapshotReady(t, vs)
		name, ok := strings.CutPrefix(handle, "bak://"+volume+"/")
		if !ok {
			t.Fatalf("VolumeSnapshot %s: handle %q, want bak://%s/<backup>", vs, handle, volume)
		}
		b, err := api.Backup(ctx, volume, name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	incremental := e.snapshotClass(t, "bak-incremental", map[string]any{"type": "bak", "backupMode": "incremental", "team": "db"})
	full := e.snapshotClass(t, "bak-full", map[string]any{"type": "bak", "backupMode": "full"})
	e.volumeSnapshot(t, "bak-1", incremental, "data")
	first := backupOf("bak-1")
	if first.Labels["team"] != "db" || first.Labels["backupMode"] != "incremental" || first.Labels["type"] != "bak" {
		t.Errorf("backup %s of the incremental class: labels %v, want team=db, backupMode=incremental, type=bak", first.Name, first.Labels)
	}
	e.volumeSnapshot(t, "bak-2", full, "data")
	if b := backupOf("bak-2"); b.BackupMode != "full" || b.Labels["team"] != "" {
		t.Errorf("backup %s of the full class: backupMode %q, labels %v; want full, without the other class's team", b.Name, b.BackupMode, b.Labels)
	}
	e.volumeSnapshot(t, "bak-3", incremental, "data")
	if b := backupOf("bak-3"); b.BackupMode != "incremental" {
		t.Errorf("backup %s of the incremental class after a full one: backupMode %q, want incremental", b.Name, b.BackupMode)
	}

	biClass := e.snapshotClass(t, "bi", map[string]any{"type": "bi", "exportType": "raw"})
	e.volumeSnapshot(t, "bi-1", biClass, "data")
	handle, size := e.snapshotReady(t, "bi-1")
	image, ok := strings.CutPrefix(handle, "bi://backing?backingImage=")
	image, rest, _ := strings.Cut(image, "&")
	if !ok || rest != "backingImageDataSourceType=export-from-volume&export-type=raw&volume-name="+volume || !strings.HasPrefix(image, "snapshot-") {
		t.Fatalf("handle %q: want Longhorn's bi://backing?backingImage=snapshot-<uid>&backingImageDataSourceType=export-from-volume&export-type=raw&volume-name=%s", handle, volume)
	}
	if size != "16Mi" {
		t.Errorf("restoreSize %q: want the volume's 16Mi", size)
	}
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(ctx, image, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("backing image %s: %v", image, err)
	}
	if bi.Spec.SourceType != longhorn.BackingImageDataSourceTypeExportFromVolume || bi.Spec.SourceParameters[longhorn.DataSourceParameterVolumeName] != volume {
		t.Fatalf("backing image %s: %s %v, want an export of %s", image, bi.Spec.SourceType, bi.Spec.SourceParameters, volume)
	}
	// Written after the export: the claim from it must not have it.
	framework.QemuIO(t, endpoint, "write -P 0x49 0 512k", "flush")

	apiGroup := "snapshot.storage.k8s.io"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "from-bi"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
			DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: "bi-1"},
		},
	}
	if _, err := e.Kube.CoreV1().PersistentVolumeClaims(e.NS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	v := e.volume(t, e.waitBound(t, "from-bi"))
	if v.Spec.BackingImage != image {
		t.Fatalf("the volume of from-bi: backingImage %q, want %q", v.Spec.BackingImage, image)
	}
	if got := e.AttachedContent(t, v.Name); !bytes.Equal(got, want) {
		t.Error("the volume of from-bi does not hold the bytes of the volume when it was exported")
	}

	// The image outlives its VolumeSnapshot while a volume uses it (the
	// snapshotter retries the refused delete); once from-bi is gone, the
	// VolumeSnapshot's deletion deletes it.
	if err := e.Kube.CoreV1().PersistentVolumeClaims(e.NS).Delete(ctx, "from-bi", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "the volume of from-bi gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, v.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	e.deleteVolumeSnapshot(t, "bi-1")
	framework.Eventually(t, 30*time.Second, "backing image "+image+" deleted", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(ctx, image, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
