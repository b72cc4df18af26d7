//go:build e2e

package csi

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSINodeFilesystemVolume calls the Node service as the kubelet
// would, on a real volume attached to the node: stage (ext4 made on the
// blank device and mounted), publish, write a file, unpublish, unstage,
// stage again and read the file back; every call twice is no error, and
// each undo leaves no mount, loop device or nbdfuse behind.
func TestCSINodeFilesystemVolume(t *testing.T) {
	e := newCSINodeEnv(t)
	ctx := context.Background()
	staging, target, roTarget := e.path("staging"), e.path("pod/mount"), e.path("pod-ro/mount")

	caps, err := e.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var declared []string
	for _, c := range caps.Capabilities {
		declared = append(declared, c.GetRpc().GetType().String())
	}
	if strings.Join(declared, ",") != "STAGE_UNSTAGE_VOLUME,GET_VOLUME_STATS,EXPAND_VOLUME,SINGLE_NODE_MULTI_WRITER" {
		t.Errorf("capabilities %v", declared)
	}

	e.Call(t, "POST", "/v1/volumes", `{"name":"data","size":"64Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "data", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	_, err = e.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: "data", StagingTargetPath: staging, VolumeCapability: mountCap("")})
	expectCode(t, err, codes.FailedPrecondition, "volume data is not attached", "ControllerPublishVolume")
	e.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "data", "attached with an endpoint", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })

	e.stage(t, "data", staging, mountCap("", "noatime"))
	e.stage(t, "data", staging, mountCap("", "noatime")) // again: nothing to do
	if out, err := exec.Command("findmnt", "-n", "-o", "FSTYPE,OPTIONS", staging).Output(); err != nil || !strings.HasPrefix(string(out), "ext4 ") || !strings.Contains(string(out), "noatime") {
		t.Fatalf("the staging path's mount: %q, %v; want ext4 with noatime", out, err)
	}
	e.publish(t, "data", staging, target, mountCap(""), false)
	e.publish(t, "data", staging, target, mountCap(""), false)
	if err := os.WriteFile(filepath.Join(target, "hello.txt"), []byte("written through the pod's mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stats, err := e.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: "data", VolumePath: target})
	if err != nil {
		t.Fatal(err)
	}
	if len(stats.Usage) != 2 || stats.Usage[0].Unit != csipb.VolumeUsage_BYTES || stats.Usage[0].Total < 50<<20 || stats.Usage[0].Total > 64<<20 || stats.Usage[0].Used <= 0 ||
		stats.Usage[1].Unit != csipb.VolumeUsage_INODES || stats.Usage[1].Used <= 0 {
		t.Errorf("stats of a 64 MiB ext4 volume: %v", stats.Usage)
	}

	// Read-only, a second pod: it reads, it cannot write.
	e.publish(t, "data", staging, roTarget, mountCap(""), true)
	if data, err := os.ReadFile(filepath.Join(roTarget, "hello.txt")); err != nil || !bytes.HasPrefix(data, []byte("written")) {
		t.Errorf("read through the read-only mount: %q, %v", data, err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "nope"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("a write through the read-only mount: %v, want EROFS", err)
	}
	e.unpublish(t, "data", roTarget)

	// The device is in a pod's use: unstaging it now would pull it away.
	_, err = e.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: "data", StagingTargetPath: staging})
	expectCode(t, err, codes.FailedPrecondition, "still published at "+target)

	e.unpublish(t, "data", target)
	e.unpublish(t, "data", target) // again: nothing to do
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the target path is left: %v", err)
	}
	e.unstage(t, "data", staging)
	e.unstage(t, "data", staging)
	e.assertNothingLeft(t)

	// Stage again: the filesystem is kept (not made again) and has the file.
	e.stage(t, "data", staging, mountCap("ext4"))
	e.publish(t, "data", staging, target, mountCap("ext4"), false)
	if data, err := os.ReadFile(filepath.Join(target, "hello.txt")); err != nil || string(data) != "written through the pod's mount\n" {
		t.Fatalf("the file after a new stage: %q, %v", data, err)
	}

	// A driver that restarts finds what it staged and undoes it.
	e.stop()
	e.startDriver(t)
	e.stage(t, "data", staging, mountCap("ext4"))
	e.unpublish(t, "data", target)
	e.unstage(t, "data", staging)
	e.assertNothingLeft(t)

	// nbdfuse dies (killed, or the node restarted): a new stage undoes
	// what is left and makes it again; an unstage undoes what is left.
	for _, then := range []string{"stage", "unstage"} {
		e.stage(t, "data", staging, mountCap("ext4"))
		pids := nbdfusesUnder(e.devicesDir())
		if len(pids) != 1 {
			t.Fatalf("nbdfuse processes of the stage: %v", pids)
		}
		if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 10*time.Second, "nbdfuse ends", func() (bool, error) { return len(nbdfusesUnder(e.devicesDir())) == 0, nil })
		if then == "stage" {
			e.stage(t, "data", staging, mountCap("ext4"))
			if data, err := os.ReadFile(filepath.Join(staging, "hello.txt")); err != nil || !bytes.HasPrefix(data, []byte("written")) {
				t.Fatalf("the file after nbdfuse died and the volume was staged again: %q, %v", data, err)
			}
			e.unstage(t, "data", staging)
		} else {
			e.unstage(t, "data", staging)
			e.assertNothingLeft(t)
		}
	}

	// A capability of another filesystem does not reformat it.
	_, err = e.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: "data", StagingTargetPath: staging, VolumeCapability: mountCap("xfs")})
	expectCode(t, err, codes.FailedPrecondition, "has a ext4 filesystem and the capability asks for xfs")
	e.assertNothingLeft(t)
}

// TestCSINodeBlockVolume: a raw block volume is published as a device
// file; bytes written to it are there after it is unstaged and staged
// again. A filesystem capability on it afterwards is refused: the device
// has data that is no filesystem, which is never formatted over.
func TestCSINodeBlockVolume(t *testing.T) {
	e := newCSINodeEnv(t)
	ctx := context.Background()
	staging, target := e.path("staging"), e.path("pod/dev")
	e.attachedVolume(t, "raw", "32Mi")

	e.stage(t, "raw", staging, blockCap())
	e.stage(t, "raw", staging, blockCap())
	e.publish(t, "raw", staging, target, blockCap(), false)
	e.publish(t, "raw", staging, target, blockCap(), false)
	fi, err := os.Stat(target)
	if err != nil || fi.Mode()&os.ModeDevice == 0 {
		t.Fatalf("the target path is no device: %v, %v", fi, err)
	}
	payload := bytes.Repeat([]byte("raw block bytes!"), 4096) // 64 KiB
	writeDevice(t, target, 4<<20, payload)
	stats, err := e.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: "raw", VolumePath: target})
	if err != nil || len(stats.Usage) != 1 || stats.Usage[0].Total != 32<<20 {
		t.Errorf("stats of a 32 MiB block volume: %v, %v", stats, err)
	}
	e.unpublish(t, "raw", target)
	e.unpublish(t, "raw", target)
	e.unstage(t, "raw", staging)
	e.unstage(t, "raw", staging)
	e.assertNothingLeft(t)

	e.stage(t, "raw", staging, blockCap())
	e.publish(t, "raw", staging, target, blockCap(), false)
	if got := readDevice(t, target, 4<<20, len(payload)); !bytes.Equal(got, payload) {
		t.Fatalf("after a new stage the device has %q..., want the bytes written", got[:32])
	}
	_, err = e.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "raw", StagingTargetPath: staging, TargetPath: e.path("pod2/mount"), VolumeCapability: mountCap("")})
	expectCode(t, err, codes.InvalidArgument, "volume_capability", "staged as block device")
	e.unpublish(t, "raw", target)

	// Detached and attached again while staged (a node that restarted):
	// the export is at a new endpoint; a new stage undoes the old device
	// and makes one of the new export.
	before := e.Call(t, "GET", "/v1/volumes/raw", "").Expect(t, 200).Body["endpoint"]
	e.Call(t, "POST", "/v1/volumes/raw?action=detach", `{}`).Expect(t, 200)
	e.WaitVolume(t, "raw", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/raw?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	after := e.WaitVolume(t, "raw", "attached again", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"]
	e.stage(t, "raw", staging, blockCap())
	e.publish(t, "raw", staging, target, blockCap(), false)
	if got := readDevice(t, target, 4<<20, len(payload)); !bytes.Equal(got, payload) {
		t.Fatalf("after the volume was attached again (%v, then %v) the device has %q...", before, after, got[:32])
	}
	e.unpublish(t, "raw", target)
	e.unstage(t, "raw", staging)

	// Data first: bytes that are no filesystem are not formatted over.
	_, err = e.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: "raw", StagingTargetPath: staging, VolumeCapability: mountCap("ext4")})
	expectCode(t, err, codes.FailedPrecondition, "65536 bytes of it have been written", "it is not formatted")
	e.assertNothingLeft(t)
	if got := readDevice(t, deviceOfNewStage(t, e, "raw", staging), 4<<20, len(payload)); !bytes.Equal(got, payload) {
		t.Fatal("the refused stage changed the device's bytes")
	}
	e.unstage(t, "raw", staging)
	e.assertNothingLeft(t)
}

// The first stage names xfs as a StorageClass's fsType does, in the
// volume context the Controller service returns.
func TestCSINodeXFS(t *testing.T) {
	e := newCSINodeEnv(t)
	if _, err := exec.LookPath("mkfs.xfs"); err != nil {
		t.Fatal("mkfs.xfs is not installed: scripts/install-test-deps.sh installs xfsprogs")
	}
	staging, target := e.path("staging"), e.path("pod/mount")
	// mkfs.xfs makes nothing under 300 MiB.
	e.attachedVolume(t, "xfsvol", "320Mi")
	if _, err := e.node.NodeStageVolume(context.Background(), &csipb.NodeStageVolumeRequest{
		VolumeId: "xfsvol", StagingTargetPath: staging, VolumeCapability: mountCap(""), VolumeContext: map[string]string{"fsType": "xfs"},
	}); err != nil {
		t.Fatal(err)
	}
	e.publish(t, "xfsvol", staging, target, mountCap("xfs"), false)
	if err := os.WriteFile(filepath.Join(target, "f"), []byte("xfs"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.unpublish(t, "xfsvol", target)
	e.unstage(t, "xfsvol", staging)
	e.assertNothingLeft(t)
	e.stage(t, "xfsvol", staging, mountCap("xfs"))
	if out, err := exec.Command("findmnt", "-n", "-o", "FSTYPE", staging).Output(); err != nil || strings.TrimSpace(string(out)) != "xfs" {
		t.Errorf("the staging mount: %q, %v", out, err)
	}
	if data, err := os.ReadFile(filepath.Join(staging, "f")); err != nil || string(data) != "xfs" {
		t.Errorf("the file after a new stage: %q, %v", data, err)
	}
	e.unstage(t, "xfsvol", staging)
	e.assertNothingLeft(t)
}

// deviceOfNewStage stages a volume as a block volume and returns its
// device, as the state file records it.
func deviceOfNewStage(t *testing.T, e *csiNodeEnv, id, staging string) string {
	t.Helper()
	e.stage(t, id, staging, blockCap())
	loops := loopsUnder(t, e.devicesDir())
	if len(loops) != 1 {
		t.Fatalf("loop devices of the stage: %v", loops)
	}
	return loops[0]
}

func writeDevice(t *testing.T, path string, off int64, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readDevice(t *testing.T, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}
