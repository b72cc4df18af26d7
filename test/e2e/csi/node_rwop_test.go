//go:build e2e

package csi

import (
	"context"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// singleWriterCap is a mount capability of a ReadWriteOncePod claim.
func singleWriterCap() *csipb.VolumeCapability {
	c := mountCap("ext4")
	c.AccessMode = &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}
	return c
}

// TestCSINodeReadWriteOncePod publishes a volume for a single writer: a
// second publish at another target path, for a single writer or not, is
// refused while the first stands, and taken once it is unpublished; the
// same publish again is no error. Several publishes of a multi-writer
// volume are taken.
func TestCSINodeReadWriteOncePod(t *testing.T) {
	e := newCSINodeEnv(t)
	staging, first, second := e.path("staging"), e.path("pod-a/mount"), e.path("pod-b/mount")
	e.attachedVolume(t, "rwop", "64Mi")
	e.stage(t, "rwop", staging, singleWriterCap())
	e.publish(t, "rwop", staging, first, singleWriterCap(), false)
	e.publish(t, "rwop", staging, first, singleWriterCap(), false) // the same call again
	for name, c := range map[string]*csipb.VolumeCapability{"a single writer": singleWriterCap(), "a multi-writer": mountCap("ext4")} {
		_, err := e.node.NodePublishVolume(context.Background(), &csipb.NodePublishVolumeRequest{
			VolumeId: "rwop", StagingTargetPath: staging, TargetPath: second, VolumeCapability: c})
		if err == nil {
			t.Fatalf("a second publish for %s was taken while the single writer's stands", name)
		}
		expectCode(t, err, codes.FailedPrecondition, "ReadWriteOncePod", first)
	}
	e.unpublish(t, "rwop", first)
	e.publish(t, "rwop", staging, second, singleWriterCap(), false)
	e.unpublish(t, "rwop", second)

	// A multi-writer volume is published for several pods at once.
	multi := mountCap("ext4")
	multi.AccessMode = &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}
	e.publish(t, "rwop", staging, first, multi, false)
	e.publish(t, "rwop", staging, second, multi, false)
	e.unpublish(t, "rwop", first)
	e.unpublish(t, "rwop", second)
	e.unstage(t, "rwop", staging)
	e.assertNothingLeft(t)
}
