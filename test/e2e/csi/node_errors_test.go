//go:build e2e

package csi

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestCSINodeRefusesBadRequests: each fault gets the spec's code and a
// message naming the field, and makes nothing.
func TestCSINodeRefusesBadRequests(t *testing.T) {
	e := newCSINodeEnv(t)
	ctx := context.Background()
	staging := e.path("staging")
	e.attachedVolume(t, "vol", "16Mi")

	stage := func(r *csipb.NodeStageVolumeRequest) error { _, err := e.node.NodeStageVolume(ctx, r); return err }
	expectCode(t, stage(&csipb.NodeStageVolumeRequest{StagingTargetPath: staging, VolumeCapability: mountCap("")}), codes.InvalidArgument, "volume_id is missing")
	expectCode(t, stage(&csipb.NodeStageVolumeRequest{VolumeId: "vol", VolumeCapability: mountCap("")}), codes.InvalidArgument, "staging_target_path is missing")
	expectCode(t, stage(&csipb.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging}), codes.InvalidArgument, "volume_capability is missing")
	expectCode(t, stage(&csipb.NodeStageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, VolumeCapability: mountCap("zfs")}), codes.InvalidArgument, `volume_capability.mount.fs_type "zfs"`)
	expectCode(t, stage(&csipb.NodeStageVolumeRequest{VolumeId: "nosuch", StagingTargetPath: staging, VolumeCapability: mountCap("")}), codes.NotFound, "volume nosuch does not exist")

	_, err := e.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, VolumeCapability: mountCap("")})
	expectCode(t, err, codes.InvalidArgument, "target_path is missing")
	_, err = e.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "vol", TargetPath: e.path("t"), VolumeCapability: mountCap("")})
	expectCode(t, err, codes.InvalidArgument, "staging_target_path is missing")
	_, err = e.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, TargetPath: e.path("t"), VolumeCapability: mountCap("")})
	expectCode(t, err, codes.FailedPrecondition, "not staged on this node")
	_, err = e.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "vol"})
	expectCode(t, err, codes.InvalidArgument, "target_path is missing")
	_, err = e.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: "vol"})
	expectCode(t, err, codes.InvalidArgument, "staging_target_path is missing")
	_, err = e.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: "vol", VolumePath: e.path("nothing")})
	expectCode(t, err, codes.NotFound, "volume_path")

	// Undoing what was never done is done.
	e.unpublish(t, "vol", e.path("t"))
	e.unstage(t, "vol", staging)
	e.assertNothingLeft(t)
}
