//go:build e2e

package csisidecars

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// What the kubelet and its node do for the driver, where no kubelet runs:
// the Kubernetes Node and its CSINode (as the kubelet registers the
// driver's node ID and topology key), and the Node service's calls, made
// over the driver's socket as the kubelet makes them.

// hostnameKey is the driver's topology key, a Kubernetes node's hostname
// label, whose value is the Longhorn node.
const hostnameKey = "kubernetes.io/hostname"

// kubeNode makes the Kubernetes node name with its hostname label the
// Longhorn node longhornNode, and its CSINode naming the driver there with
// its topology key, as the kubelet registers them. The sidecar env's
// cleanup deletes both.
func (s *sidecarEnv) kubeNode(t *testing.T, name, longhornNode string) {
	t.Helper()
	s.kubeNodeOf(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, longhornNode)
}

// kubeNodeOf is kubeNode for a Node the caller filled in (a status, for
// a scheduler to consider it): it gets the hostname label.
func (s *sidecarEnv) kubeNodeOf(t *testing.T, node *corev1.Node, longhornNode string) {
	t.Helper()
	ctx := context.Background()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[hostnameKey] = longhornNode
	if _, err := s.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Kube.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: csi.DriverName, NodeID: longhornNode, TopologyKeys: []string{hostnameKey},
		}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// attach makes a VolumeAttachment of the PV to the Kubernetes node, as the
// attach/detach controller does for a pod there, and waits until the
// external-attacher says it is attached; it returns its name. An
// attachment the test leaves is deleted by the env's cleanup, after the
// test's own (the Node service's undo, as the kubelet's comes first).
func (s *sidecarEnv) attach(t *testing.T, pv *corev1.PersistentVolume, node string) string {
	t.Helper()
	ctx := context.Background()
	pvName := pv.Name
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: s.prefix + "-" + pv.Name},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: csi.DriverName,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName},
		},
	}
	if _, err := s.Kube.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "VolumeAttachment "+va.Name+" attached", func() (bool, error) {
		got, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if e := got.Status.AttachError; e != nil {
			t.Logf("attach error: %s", e.Message)
		}
		return got.Status.Attached, nil
	})
	return va.Name
}

// detach deletes the VolumeAttachment and waits until the attacher has
// detached the volume and let it go; one already gone is detached.
func (s *sidecarEnv) detach(t *testing.T, va string) {
	t.Helper()
	ctx := context.Background()
	if err := s.Kube.StorageV1().VolumeAttachments().Delete(ctx, va, metav1.DeleteOptions{}); apierrors.IsNotFound(err) {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "VolumeAttachment "+va+" gone once detached", func() (bool, error) {
		_, err := s.Kube.StorageV1().VolumeAttachments().Get(ctx, va, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// kubeletCalls are the Node service's calls as the kubelet makes them
// for one volume, with its staging and target paths.
type kubeletCalls struct {
	node            csipb.NodeClient
	id              string
	staging, target string
	capability      *csipb.VolumeCapability
}

// requireNodeTools skips a test that reaches the Node service where it
// cannot run: it needs root, nbdfuse and losetup (and mkfs of fsType).
func requireNodeTools(t *testing.T, fsType string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the Node service needs root: it runs losetup, mkfs and mount")
	}
	for _, tool := range []string{"nbdfuse", "nbdinfo", "losetup", "mkfs." + fsType} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node service makes a volume's device with nbdfuse (libnbd-bin) and a loop device (util-linux), and its filesystem", tool)
		}
	}
}

// kubelet returns the Node service's calls for the volume, a filesystem
// of fsType, over the driver's socket. When the test ends it unpublishes
// and unstages the volume (both idempotent), as the kubelet does when
// its pod goes.
func (s *sidecarEnv) kubelet(t *testing.T, id, fsType string) *kubeletCalls {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+s.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	k := &kubeletCalls{
		node: csipb.NewNodeClient(conn), id: id,
		staging: filepath.Join(root, "staging"), target: filepath.Join(root, "pod", "mount"),
		capability: &csipb.VolumeCapability{
			AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := k.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: k.target}); err != nil {
			t.Errorf("NodeUnpublishVolume %s: %v", id, err)
		}
		if _, err := k.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: k.staging}); err != nil {
			t.Errorf("NodeUnstageVolume %s: %v", id, err)
		}
		conn.Close()
	})
	return k
}

// mount stages and publishes the volume, as the kubelet does for a pod.
func (k *kubeletCalls) mount(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := k.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: k.id, StagingTargetPath: k.staging, VolumeCapability: k.capability}); err != nil {
		t.Fatalf("NodeStageVolume %s: %v", k.id, err)
	}
	if _, err := k.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: k.id, StagingTargetPath: k.staging, TargetPath: k.target, VolumeCapability: k.capability}); err != nil {
		t.Fatalf("NodePublishVolume %s: %v", k.id, err)
	}
}

// unmount unpublishes and unstages the volume, as the kubelet does when
// its pod goes.
func (k *kubeletCalls) unmount(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := k.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: k.id, TargetPath: k.target}); err != nil {
		t.Fatalf("NodeUnpublishVolume %s: %v", k.id, err)
	}
	if _, err := k.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: k.id, StagingTargetPath: k.staging}); err != nil {
		t.Fatalf("NodeUnstageVolume %s: %v", k.id, err)
	}
}

// expand is the kubelet's NodeExpandVolume of the published volume to
// size bytes; it returns the size the driver answers.
func (k *kubeletCalls) expand(t *testing.T, size int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := k.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: k.id, VolumePath: k.target,
		CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapability: k.capability})
	if err != nil {
		t.Fatalf("NodeExpandVolume %s to %d: %v", k.id, size, err)
	}
	return resp.GetCapacityBytes()
}
