//go:build e2e

package csisidecars

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSIResizerGrowsAClaim grows claims through Kubernetes' own
// external-resizer, as a user does: the PVC's spec.resources.requests.storage
// is raised through the apiserver, the resizer calls ControllerExpandVolume,
// the PV's capacity and the Longhorn Volume's size grow, and the PVC shows
// what Kubernetes shows until the kubelet has grown the filesystem: its
// old status.capacity, the new size allocated, FileSystemResizePending
// and NodeResizePending. The kubelet's part, which no kubelet runs here to
// do, is the Node service's calls over the driver's socket, as the
// kubelet makes them, and the filesystem is seen growing.
//
// Each claim is attached (a VolumeAttachment, which the external-attacher
// attaches), mounted and written first. Offline: the ext4 claim's pod
// has gone (unmounted, detached) when it grows, its engine grows it at
// the next attach, and the next pod's mount (its stage grows ext4 before
// mounting it) and NodeExpandVolume find the filesystem at the new size.
// Online: the xfs claim grows mounted (ControllerExpandVolume returns once
// the engine has the size), then NodeExpandVolume grows the mounted
// filesystem. Either way the file is intact. (Online ext4 needs
// CAP_SYS_RESOURCE, which this project's machines lack: test/e2e/csi's
// expand tests cover it both ways.)
func TestCSIResizerGrowsAClaim(t *testing.T) {
	s := newSidecarEnv(t)
	node := s.prefix + "-kubelet"
	s.kubeNode(t, node, "node-1")
	for _, tc := range []struct {
		name     string
		fsType   string
		from, to int64
		online   bool
	}{
		{"offline ext4 claim", "ext4", 64 << 20, 160 << 20, false},
		{"online xfs claim", "xfs", 300 << 20, 400 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireNodeTools(t, tc.fsType)
			ctx := context.Background()
			sc := s.storageClassWith(t, "grow-"+tc.fsType, map[string]string{"fsType": tc.fsType}, func(sc *storagev1.StorageClass) {
				allow := true
				sc.AllowVolumeExpansion = &allow
			})
			claim := "grow-" + tc.fsType
			s.claimOf(t, claim, sc, tc.from)
			pv := s.waitBound(t, claim)
			id := pv.Spec.CSI.VolumeHandle

			va := s.attach(t, pv, node)
			k := s.kubelet(t, id, tc.fsType)
			k.mount(t)
			before := statfsSize(t, k.target)
			data := []byte("written before the claim grew, " + tc.name)
			if err := os.WriteFile(filepath.Join(k.target, "before"), data, 0o600); err != nil {
				t.Fatal(err)
			}
			if !tc.online {
				k.unmount(t)
				s.detach(t, va)
				s.WaitVolumeFor(t, sidecarWait, id, "volume "+id+" detached", func(v map[string]any) bool { return v["state"] == "detached" })
			}

			patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": strconv.FormatInt(tc.to, 10)}}}})
			if _, err := s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, sidecarWait, "PV "+pv.Name+" grown by the resizer", func() (bool, error) {
				got, err := s.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				c := got.Spec.Capacity[corev1.ResourceStorage]
				return c.Value() == tc.to, nil
			})
			if v := s.volume(t, pv); v.Spec.Size != tc.to {
				t.Errorf("Volume %s: spec.size %d, want %d", id, v.Spec.Size, tc.to)
			}
			if tc.online {
				// ControllerExpandVolume returned once the engine had it.
				got := s.Call(t, "GET", "/v1/volumes/"+id, "").Expect(t, 200)
				if ctrls, _ := got.Body["controllers"].([]any); len(ctrls) != 1 || ctrls[0].(map[string]any)["actualSize"] != strconv.FormatInt(tc.to, 10) {
					t.Errorf("volume %s's engine: %v, want actualSize %d", id, got.Body["controllers"], tc.to)
				}
			}
			s.expectNodeResizePending(t, claim, tc.from, tc.to)

			if !tc.online {
				// The next pod: attached again (its engine grows the
				// volume), staged and published; the kubelet, seeing the
				// resize pending, calls NodeExpandVolume.
				va = s.attach(t, pv, node)
				k.mount(t)
			}
			if got := k.expand(t, tc.to); got != tc.to {
				t.Errorf("NodeExpandVolume answered %d bytes, want %d", got, tc.to)
			}
			after := statfsSize(t, k.target)
			// A filesystem keeps some of its device for itself (its log,
			// its metadata): near the device's size, and larger than
			// before by about what the claim grew.
			if after > tc.to || after-before < (tc.to-tc.from)*8/10 {
				t.Errorf("the filesystem is %d bytes after the claim grew from %d to %d, %d before", after, tc.from, tc.to, before)
			}
			if got, err := os.ReadFile(filepath.Join(k.target, "before")); err != nil || string(got) != string(data) {
				t.Errorf("the file written before the claim grew: %q, %v", got, err)
			}
			k.unmount(t)
			s.detach(t, va)
		})
	}
}

// expectNodeResizePending checks the claim as Kubernetes shows it once
// the controller has grown its volume and the node has yet to: the new
// size allocated with NodeResizePending, FileSystemResizePending, and
// status.capacity still the old size (the kubelet sets it once it has
// grown the filesystem); and the resizer's event saying so.
func (s *sidecarEnv) expectNodeResizePending(t *testing.T, claim string, from, to int64) {
	t.Helper()
	ctx := context.Background()
	var pvc *corev1.PersistentVolumeClaim
	framework.Eventually(t, sidecarWait, "claim "+claim+" waiting for its filesystem to grow", func() (bool, error) {
		var err error
		pvc, err = s.Kube.CoreV1().PersistentVolumeClaims(s.NS).Get(ctx, claim, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range pvc.Status.Conditions {
			if c.Type == corev1.PersistentVolumeClaimFileSystemResizePending && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if c := pvc.Status.Capacity[corev1.ResourceStorage]; c.Value() != from {
		t.Errorf("claim %s: status.capacity %s, want the old %d until the node has grown it", claim, c.String(), from)
	}
	if a := pvc.Status.AllocatedResources[corev1.ResourceStorage]; a.Cmp(*resource.NewQuantity(to, resource.BinarySI)) != 0 {
		t.Errorf("claim %s: status.allocatedResources %v, want storage %d", claim, pvc.Status.AllocatedResources, to)
	}
	if st := pvc.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; st != corev1.PersistentVolumeClaimNodeResizePending {
		t.Errorf("claim %s: status.allocatedResourceStatuses %v, want storage %s", claim, pvc.Status.AllocatedResourceStatuses, corev1.PersistentVolumeClaimNodeResizePending)
	}
	framework.Eventually(t, sidecarWait, "the resizer's FileSystemResizeRequired event on "+claim, func() (bool, error) {
		events, err := s.Kube.CoreV1().Events(s.NS).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": claim, "reason": "FileSystemResizeRequired"}.String()})
		return err == nil && len(events.Items) > 0, err
	})
}

// statfsSize is the size of the filesystem mounted at path.
func statfsSize(t *testing.T, path string) int64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Blocks) * fs.Bsize
}
