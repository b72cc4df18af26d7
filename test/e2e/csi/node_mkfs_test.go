//go:build e2e

package csi

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestCSINodeMkfsParams stages a volume whose StorageClass gives
// mkfsParams: the filesystem made has the block size and label they ask
// for. A volume context whose mkfsParams name a path is refused before
// anything is made.
func TestCSINodeMkfsParams(t *testing.T) {
	e := newCSINodeEnv(t)
	staging := e.path("staging")
	e.attachedVolume(t, "mkfsvol", "64Mi")
	if _, err := e.node.NodeStageVolume(context.Background(), &csipb.NodeStageVolumeRequest{
		VolumeId: "mkfsvol", StagingTargetPath: e.path("bad"), VolumeCapability: mountCap(""),
		VolumeContext: map[string]string{"mkfsParams": "-b 1024 /dev/sda"},
	}); err == nil {
		t.Fatal("mkfsParams naming a path were taken")
	} else {
		expectCode(t, err, codes.InvalidArgument, "mkfsParams", "/dev/sda")
	}
	if _, err := e.node.NodeStageVolume(context.Background(), &csipb.NodeStageVolumeRequest{
		VolumeId: "mkfsvol", StagingTargetPath: staging, VolumeCapability: mountCap(""),
		VolumeContext: map[string]string{"mkfsParams": "-b 1024 -L shopdata -O ^metadata_csum"},
	}); err != nil {
		t.Fatal(err)
	}
	source, err := exec.Command("findmnt", "-n", "-o", "SOURCE", staging).Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("dumpe2fs", "-h", strings.TrimSpace(string(source))).CombinedOutput()
	if err != nil {
		t.Fatalf("dumpe2fs: %v: %s", err, out)
	}
	header := string(out)
	for _, want := range []string{"Block size:               1024", "Filesystem volume name:   shopdata"} {
		if !strings.Contains(header, want) {
			t.Errorf("the filesystem made lacks %q:\n%s", want, header)
		}
	}
	if strings.Contains(header, "metadata_csum") {
		t.Errorf("the filesystem has metadata_csum, which mkfsParams turned off:\n%s", header)
	}
	e.unstage(t, "mkfsvol", staging)
	e.assertNothingLeft(t)
}
