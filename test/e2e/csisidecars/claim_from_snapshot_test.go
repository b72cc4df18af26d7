//go:build e2e

package csisidecars

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSIClaimFromAVolumeSnapshot: through the real external-provisioner,
// snapshot controller and csi-snapshotter, a PVC whose dataSource is a
// VolumeSnapshot becomes Bound once its volume holds the snapshot's
// bytes: of a snap VolumeSnapshot a clone of the Longhorn snapshot (the
// source written since keeps its new bytes, the claim's volume has the
// snapshot's), of a bak one a restore of the backup. A claim smaller than
// its snapshot is refused on its events and made nothing for.
func TestCSIClaimFromAVolumeSnapshot(t *testing.T) {
	e := newSnapshotEnv(t)
	sc := e.storageClass(t, "plain", map[string]string{})
	e.claim(t, "data", sc)
	volume := e.waitBound(t, "data").Spec.CSI.VolumeHandle
	snapClass := e.snapshotClass(t, "snap", map[string]any{"type": "snap"})
	bakClass := e.snapshotClass(t, "bak", map[string]any{"type": "bak"})
	e.SetBackupTarget(t, "file://"+t.TempDir())

	endpoint := e.AttachedContentEndpoint(t, volume)
	framework.QemuIO(t, endpoint, "write -P 0x51 0 1M", "write -P 0x52 7M 1M", "flush")
	want := make([]byte, 16<<20)
	framework.Fill(want, 0x51, 0, 1<<20)
	framework.Fill(want, 0x52, 7<<20, 1<<20)
	e.volumeSnapshot(t, "snap-1", snapClass, "data")
	e.snapshotReady(t, "snap-1")
	e.volumeSnapshot(t, "bak-1", bakClass, "data")
	e.snapshotReady(t, "bak-1")
	// Written after both: neither copy may have it.
	framework.QemuIO(t, endpoint, "write -P 0x53 0 512k", "flush")

	for claim, snapshot := range map[string]string{"from-snap": "snap-1", "from-bak": "bak-1", "too-small": "snap-1"} {
		request := "16Mi"
		if claim == "too-small" {
			request = "8Mi"
		}
		apiGroup := "snapshot.storage.k8s.io"
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: &sc,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(request)}},
				DataSource:       &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VolumeSnapshot", Name: snapshot},
			},
		}
		if _, err := e.Kube.CoreV1().PersistentVolumeClaims(e.NS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for claim := range map[string]bool{"from-snap": true, "from-bak": true} {
		v := e.volume(t, e.waitBound(t, claim))
		if got := e.AttachedContent(t, v.Name); !bytes.Equal(got, want) {
			t.Errorf("the volume of PVC %s (dataSource %q, fromBackup %q) does not hold the VolumeSnapshot's bytes", claim, v.Spec.DataSource, v.Spec.FromBackup)
		}
	}
	// A claim smaller than its snapshot: refused, saying why on the
	// claim's events, and left Pending with no volume made.
	ctx := context.Background()
	framework.Eventually(t, sidecarWait, "the refusal of too-small on its events", func() (bool, error) {
		events, err := e.Kube.CoreV1().Events(e.NS).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=too-small"})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "ProvisioningFailed" && strings.Contains(ev.Message, "size") {
				return true, nil
			}
		}
		return false, nil
	})
	claim, err := e.Kube.CoreV1().PersistentVolumeClaims(e.NS).Get(ctx, "too-small", metav1.GetOptions{})
	if err != nil || claim.Status.Phase != corev1.ClaimPending || claim.Spec.VolumeName != "" {
		t.Errorf("the refused claim: phase %v, volume %q, %v; want Pending with none", claim.Status.Phase, claim.Spec.VolumeName, err)
	}
}
