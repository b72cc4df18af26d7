//go:build e2e

package csisidecars

import (
	"bytes"
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSIClaimFromAClaimIsAClone: through the real external-provisioner,
// a PVC whose dataSource is another PVC (detached, holding bytes written
// through NBD) becomes Bound once its Volume is a completed clone of the
// source's, and that volume reads the source's bytes; the source keeps
// them.
func TestCSIClaimFromAClaimIsAClone(t *testing.T) {
	t.Parallel()
	s := newSidecarEnv(t)
	sc := s.storageClass(t, "clone", map[string]string{})
	s.claim(t, "src", sc)
	srcVolume := s.waitBound(t, "src").Spec.CSI.VolumeHandle

	const size = 16 << 20
	want := make([]byte, size)
	framework.Fill(want, 0x6b, 0, 1<<20)
	framework.Fill(want, 0x6c, 9<<20, 2<<20)
	endpoint := s.AttachedContentEndpoint(t, srcVolume)
	framework.QemuIO(t, endpoint, "write -P 0x6b 0 1M", "write -P 0x6c 9M 2M", "flush")
	s.Call(t, "POST", "/v1/volumes/"+srcVolume+"?action=detach", "").Expect(t, 200)
	s.WaitVolumeFor(t, sidecarWait, srcVolume, "source detached", func(v map[string]any) bool { return v["state"] == "detached" })

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "copy"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}},
			DataSource:       &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"},
		},
	}
	if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Create(context.Background(), pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	copied := s.volume(t, s.waitBound(t, "copy"))
	if copied.Spec.DataSource != "vol://"+srcVolume || copied.Status.CloneStatus.State != "completed" || copied.Status.CloneStatus.SourceVolume != srcVolume {
		t.Errorf("the claim's volume, once Bound: dataSource %q, cloneStatus %+v", copied.Spec.DataSource, copied.Status.CloneStatus)
	}
	if got := s.AttachedContent(t, copied.Name); !bytes.Equal(got, want) {
		t.Error("the clone of the claim does not hold the source's bytes")
	}
	if got := s.AttachedContent(t, srcVolume); !bytes.Equal(got, want) {
		t.Error("the clone changed its source")
	}
}
