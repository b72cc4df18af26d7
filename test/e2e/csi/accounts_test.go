//go:build e2e

package csi

import (
	"context"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// Each CSI controller pod's account (package/rbac.yaml) may do what its
// sidecar asks of the driver, against an API that checks RBAC and takes
// only tokens of its audience, as deployed: the provisioner creates and
// deletes and reads each node's capacity, the attacher attaches and detaches, the resizer expands, the
// snapshotter takes and deletes snapshots. None may do another's action:
// the actions are update on their own subresources, not on volumes.
func TestEachCSIAccountMayDoWhatItsSidecarAsksAndNoMore(t *testing.T) {
	t.Parallel()
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) {
		o.ServiceAccount = framework.ServiceAccount
		o.APITokenAudience = "longhorn-manager"
	})
	as := func(account string) csipb.ControllerClient {
		t.Helper()
		token := framework.TokenOf(t, e.Kube, e.NS, account, "longhorn-manager")
		api := client.NewClient(e.Base+"/v1", 10*time.Second)
		api.Token = func() string { return token }
		sock, _ := framework.ServeCSIWith(t, api, csi.Options{Controller: true})
		return csipb.NewControllerClient(dialCSI(t, sock))
	}
	provisioner, attacher := as("longhorn-csi-provisioner"), as("longhorn-csi-attacher")
	resizer, snapshotter := as("longhorn-csi-resizer"), as("longhorn-csi-snapshotter")
	ctx := context.Background()
	c := mountCapability("ext4")

	created, err := provisioner.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: "pvc-accounts", CapacityRange: &csipb.CapacityRange{RequiredBytes: 16 << 20},
		VolumeCapabilities: c, Parameters: map[string]string{"numberOfReplicas": "1"}})
	if err != nil {
		t.Fatalf("CreateVolume as the provisioner: %v", err)
	}
	id := created.Volume.VolumeId
	denied := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: %v, want PermissionDenied", what, err)
		}
	}
	// The provisioner's --enable-capacity asks for each node's room, and
	// without a topology for every node's; the attacher may not.
	for _, topology := range []*csipb.Topology{{Segments: map[string]string{"kubernetes.io/hostname": "node-1"}}, nil} {
		capacity := &csipb.GetCapacityRequest{Parameters: map[string]string{"numberOfReplicas": "1"}, AccessibleTopology: topology}
		if resp, err := provisioner.GetCapacity(ctx, capacity); err != nil || resp.GetMaximumVolumeSize().GetValue() <= 0 {
			t.Errorf("GetCapacity of %v as the provisioner: %v, %v; want room", topology, resp, err)
		}
		_, err = attacher.GetCapacity(ctx, capacity)
		denied("GetCapacity as the attacher", err)
	}
	publish := &csipb.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: c[0]}
	// The provisioner reads nodes and volumes, but may not attach.
	_, err = provisioner.ControllerPublishVolume(ctx, publish)
	denied("ControllerPublishVolume as the provisioner", err)
	if _, err := attacher.ControllerPublishVolume(ctx, publish); err != nil {
		t.Fatalf("ControllerPublishVolume as the attacher: %v", err)
	}

	expand := &csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 32 << 20}, VolumeCapability: c[0]}
	_, err = attacher.ControllerExpandVolume(ctx, expand)
	denied("ControllerExpandVolume as the attacher", err)
	_, err = snapshotter.ControllerExpandVolume(ctx, expand)
	denied("ControllerExpandVolume as the snapshotter", err)
	if _, err := resizer.ControllerExpandVolume(ctx, expand); err != nil {
		t.Errorf("ControllerExpandVolume as the resizer: %v", err)
	}

	snapReq := &csipb.CreateSnapshotRequest{SourceVolumeId: id, Name: "snapshot-accounts", Parameters: map[string]string{"type": "snap"}}
	_, err = attacher.CreateSnapshot(ctx, snapReq)
	denied("CreateSnapshot as the attacher", err)
	snap, err := snapshotter.CreateSnapshot(ctx, snapReq)
	if err != nil {
		t.Fatalf("CreateSnapshot as the snapshotter: %v", err)
	}
	if _, err := snapshotter.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: snap.Snapshot.SnapshotId}); err != nil {
		t.Errorf("DeleteSnapshot as the snapshotter: %v", err)
	}
	// A bi class: the snapshotter's driver makes, reads and deletes the
	// backing image the volume is exported as (no image server runs here,
	// so the export waits; the rights are what is tested).
	biReq := &csipb.CreateSnapshotRequest{SourceVolumeId: id, Name: "snapshot-accounts-bi", Parameters: map[string]string{"type": "bi"}}
	_, err = attacher.CreateSnapshot(ctx, biReq)
	denied("CreateSnapshot of type bi as the attacher", err)
	bi, err := snapshotter.CreateSnapshot(ctx, biReq)
	if err != nil {
		t.Fatalf("CreateSnapshot of type bi as the snapshotter: %v", err)
	}
	_, err = attacher.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: bi.Snapshot.SnapshotId})
	denied("DeleteSnapshot of type bi as the attacher", err)
	if _, err := snapshotter.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{SnapshotId: bi.Snapshot.SnapshotId}); err != nil {
		t.Errorf("DeleteSnapshot of type bi as the snapshotter: %v", err)
	}

	unpublish := &csipb.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}
	_, err = resizer.ControllerUnpublishVolume(ctx, unpublish)
	denied("ControllerUnpublishVolume as the resizer", err)
	if _, err := attacher.ControllerUnpublishVolume(ctx, unpublish); err != nil {
		t.Errorf("ControllerUnpublishVolume as the attacher: %v", err)
	}
	_, err = attacher.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id})
	denied("DeleteVolume as the attacher", err)
	if _, err := provisioner.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Errorf("DeleteVolume as the provisioner: %v", err)
	}
}
