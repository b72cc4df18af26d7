//go:build e2e

package csi

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// canResizeExt4Online says whether this process may grow a mounted ext4
// filesystem: the kernel asks for CAP_SYS_RESOURCE (bit 24 of CapEff).
func canResizeExt4Online(t *testing.T) bool {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// expandEnv is a Node service and a Controller service of node-1 over
// one manager, as the external-resizer and the kubelet reach them.
type expandEnv struct {
	*csiNodeEnv
	ctrl csipb.ControllerClient
}

func newExpandEnv(t *testing.T) *expandEnv {
	e := newCSINodeEnv(t)
	return &expandEnv{csiNodeEnv: e, ctrl: csiController(t, e.APIEnv)}
}

// provision makes a volume through CreateVolume and attaches it to node-1
// through ControllerPublishVolume, as the provisioner and attacher do.
func (e *expandEnv) provision(t *testing.T, name string, size int64, c *csipb.VolumeCapability) string {
	t.Helper()
	ctx := context.Background()
	created, err := e.ctrl.CreateVolume(ctx, &csipb.CreateVolumeRequest{Name: name, CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csipb.VolumeCapability{c}, Parameters: map[string]string{"numberOfReplicas": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Volume.VolumeId
	if _, err := e.ctrl.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{VolumeId: id, NodeId: "node-1", VolumeCapability: c}); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *expandEnv) controllerExpand(t *testing.T, id string, size int64, c *csipb.VolumeCapability) *csipb.ControllerExpandVolumeResponse {
	t.Helper()
	resp, err := e.ctrl.ControllerExpandVolume(context.Background(), &csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapability: c})
	if err != nil {
		t.Fatalf("ControllerExpandVolume %s to %d: %v", id, size, err)
	}
	return resp
}

func (e *expandEnv) nodeExpand(id, path string, size int64, c *csipb.VolumeCapability) (*csipb.NodeExpandVolumeResponse, error) {
	return e.node.NodeExpandVolume(context.Background(), &csipb.NodeExpandVolumeRequest{VolumeId: id, VolumePath: path, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapability: c})
}

// release undoes what provision did, after the Node service's undo.
func (e *expandEnv) release(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ctrl.ControllerUnpublishVolume(ctx, &csipb.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: "node-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctrl.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}

func statfsTotal(t *testing.T, path string) int64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Blocks) * int64(fs.Bsize)
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func expectFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes (%v), not the %d written", path, len(got), err, len(want))
	}
}

// TestCSIExpandFilesystemVolume grows a mounted filesystem volume, ext4
// then xfs, as the external-resizer (ControllerExpandVolume) and the
// kubelet (NodeExpandVolume) do: the filesystem grows, the file written
// before is intact, a file larger than the old filesystem fits, and all
// of it reads back after the volume is unstaged and staged again. Where
// the driver lacks CAP_SYS_RESOURCE (as on this project's machines) ext4
// cannot grow online: NodeExpandVolume says so, and the next stage grows
// it.
func TestCSIExpandFilesystemVolume(t *testing.T) {
	for _, tc := range []struct {
		fsType   string
		from, to int64
	}{{"ext4", 64 << 20, 160 << 20}, {"xfs", 300 << 20, 400 << 20}} {
		t.Run(tc.fsType, func(t *testing.T) {
			e := newExpandEnv(t)
			c := mountCap(tc.fsType)
			id := e.provision(t, "pvc-grow-"+tc.fsType, tc.from, c)
			staging, target := e.path("staging"), e.path("pod/mount")
			e.stage(t, id, staging, c)
			e.publish(t, id, staging, target, c, false)
			before := randomBytes(t, 1<<20)
			if err := os.WriteFile(filepath.Join(target, "before"), before, 0o644); err != nil {
				t.Fatal(err)
			}
			oldTotal := statfsTotal(t, target)

			resp := e.controllerExpand(t, id, tc.to, c)
			if resp.CapacityBytes != tc.to || !resp.NodeExpansionRequired {
				t.Fatalf("ControllerExpandVolume: %v, want %d bytes and node expansion", resp, tc.to)
			}
			again := e.controllerExpand(t, id, tc.to, c) // idempotent
			if again.CapacityBytes != tc.to {
				t.Fatalf("ControllerExpandVolume again: %v", again)
			}
			v := e.WaitVolume(t, id, "the engine grown", func(v map[string]any) bool { return framework.ActualSize(v) == strconv.FormatInt(tc.to, 10) })
			if v["size"] != strconv.FormatInt(tc.to, 10) {
				t.Fatalf("volume size %v", v["size"])
			}

			nresp, err := e.nodeExpand(id, target, tc.to, c)
			online := tc.fsType == "xfs" || canResizeExt4Online(t)
			if online {
				if err != nil || nresp.CapacityBytes != tc.to {
					t.Fatalf("NodeExpandVolume: %v, %v", nresp, err)
				}
			} else {
				expectCode(t, err, codes.FailedPrecondition, "CAP_SYS_RESOURCE", "next staged")
				// The device grew; the filesystem grows at the next stage.
				e.unpublish(t, id, target)
				e.unstage(t, id, staging)
				e.stage(t, id, staging, c)
				e.publish(t, id, staging, target, c, false)
				if nresp, err = e.nodeExpand(id, target, tc.to, c); err != nil || nresp.CapacityBytes != tc.to {
					t.Fatalf("NodeExpandVolume after the stage grew the filesystem: %v, %v", nresp, err)
				}
			}
			newTotal := statfsTotal(t, target)
			if newTotal < oldTotal+(tc.to-tc.from)*8/10 {
				t.Fatalf("filesystem %d bytes before, %d after growing the volume from %d to %d", oldTotal, newTotal, tc.from, tc.to)
			}
			expectFile(t, filepath.Join(target, "before"), before)
			// More than the old filesystem could hold: it lands in the new space.
			big := randomBytes(t, int(oldTotal))
			if err := os.WriteFile(filepath.Join(target, "big"), big, 0o644); err != nil {
				t.Fatalf("a file of the old filesystem's size: %v", err)
			}
			stats, err := e.node.NodeGetVolumeStats(context.Background(), &csipb.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
			if err != nil || stats.Usage[0].Total != newTotal {
				t.Fatalf("NodeGetVolumeStats: %v, %v; want a total of %d", stats, err, newTotal)
			}

			e.unpublish(t, id, target)
			e.unstage(t, id, staging)
			e.stage(t, id, staging, c)
			e.publish(t, id, staging, target, c, false)
			expectFile(t, filepath.Join(target, "before"), before)
			expectFile(t, filepath.Join(target, "big"), big)
			if got := statfsTotal(t, target); got != newTotal {
				t.Fatalf("staged again: filesystem of %d bytes, not %d", got, newTotal)
			}
			e.unpublish(t, id, target)
			e.unstage(t, id, staging)
			e.release(t, id)
		})
	}
}

// TestCSIExpandBlockVolume grows a raw block volume published to a pod:
// its device grows in place, the bytes written at the old end read back,
// the new end takes writes and reads them back after a new stage.
func TestCSIExpandBlockVolume(t *testing.T) {
	e := newExpandEnv(t)
	c := blockCap()
	id := e.provision(t, "pvc-grow-block", 32<<20, c)
	staging, target := e.path("staging"), e.path("pod/dev")
	e.stage(t, id, staging, c)
	e.publish(t, id, staging, target, c, false)
	tail := randomBytes(t, 4096)
	writeDevice(t, target, 32<<20-4096, tail)

	resp := e.controllerExpand(t, id, 64<<20, c)
	if resp.CapacityBytes != 64<<20 || !resp.NodeExpansionRequired {
		t.Fatalf("ControllerExpandVolume: %v (a block volume's node device grows through NodeExpandVolume)", resp)
	}
	nresp, err := e.nodeExpand(id, target, 64<<20, c)
	if err != nil || nresp.CapacityBytes != 64<<20 {
		t.Fatalf("NodeExpandVolume: %v, %v", nresp, err)
	}
	if size := deviceBytes(t, target); size != 64<<20 {
		t.Fatalf("the published device is %d bytes, want %d", size, 64<<20)
	}
	if got := readDevice(t, target, 32<<20-4096, 4096); !bytes.Equal(got, tail) {
		t.Fatal("the bytes at the old end changed")
	}
	if got := readDevice(t, target, 32<<20, 1<<20); !bytes.Equal(got, make([]byte, 1<<20)) {
		t.Fatal("the new space does not read as zeros")
	}
	end := randomBytes(t, 4096)
	writeDevice(t, target, 64<<20-4096, end)

	e.unpublish(t, id, target)
	e.unstage(t, id, staging)
	e.stage(t, id, staging, c)
	e.publish(t, id, staging, target, c, false)
	if got := readDevice(t, target, 64<<20-4096, 4096); !bytes.Equal(got, end) {
		t.Fatal("staged again, the new end reads other bytes")
	}
	if got := readDevice(t, target, 32<<20-4096, 4096); !bytes.Equal(got, tail) {
		t.Fatal("staged again, the old end reads other bytes")
	}
	e.unpublish(t, id, target)
	e.unstage(t, id, staging)
	e.release(t, id)
}

// TestCSIExpandRefusals: what the two calls refuse, with the code the CSI
// spec names and a message naming the field; nothing changes.
func TestCSIExpandRefusals(t *testing.T) {
	e := newExpandEnv(t)
	ctx := context.Background()
	c := mountCap("ext4")
	id := e.provision(t, "pvc-refusals", 64<<20, c)
	expand := func(req *csipb.ControllerExpandVolumeRequest) func() error {
		return func() error { _, err := e.ctrl.ControllerExpandVolume(ctx, req); return err }
	}
	wantCode(t, "no volume_id", codes.InvalidArgument, "volume_id", expand(&csipb.ControllerExpandVolumeRequest{CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}}))
	wantCode(t, "no capacity_range", codes.InvalidArgument, "capacity_range", expand(&csipb.ControllerExpandVolumeRequest{VolumeId: id}))
	wantCode(t, "an unknown volume", codes.NotFound, "nope", expand(&csipb.ControllerExpandVolumeRequest{VolumeId: "nope", CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}}))
	wantCode(t, "required above limit", codes.InvalidArgument, "capacity_range", expand(&csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30, LimitBytes: 1 << 29}}))
	wantCode(t, "beyond the disk", codes.OutOfRange, "size", expand(&csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 60}}))
	// Smaller: the volume is at least that large already, and never shrinks.
	if resp := e.controllerExpand(t, id, 32<<20, c); resp.CapacityBytes != 64<<20 {
		t.Fatalf("a smaller size: %v, want the volume's 64 MiB", resp)
	}
	wantCode(t, "a limit below the volume's size", codes.OutOfRange, "never shrinks", expand(&csipb.ControllerExpandVolumeRequest{VolumeId: id, CapacityRange: &csipb.CapacityRange{RequiredBytes: 16 << 20, LimitBytes: 32 << 20}}))
	v := e.WaitVolume(t, id, "64 MiB", func(map[string]any) bool { return true })
	if v["size"] != strconv.Itoa(64<<20) {
		t.Fatalf("after the refusals the volume has %v bytes", v["size"])
	}

	staging := e.path("staging")
	node := func(req *csipb.NodeExpandVolumeRequest) func() error {
		return func() error { _, err := e.node.NodeExpandVolume(ctx, req); return err }
	}
	wantCode(t, "node: no volume_id", codes.InvalidArgument, "volume_id", node(&csipb.NodeExpandVolumeRequest{VolumePath: staging}))
	wantCode(t, "node: no volume_path", codes.InvalidArgument, "volume_path", node(&csipb.NodeExpandVolumeRequest{VolumeId: id}))
	wantCode(t, "node: not staged", codes.NotFound, "not staged", node(&csipb.NodeExpandVolumeRequest{VolumeId: id, VolumePath: staging}))
	e.stage(t, id, staging, c)
	wantCode(t, "node: a path that is not the volume's", codes.NotFound, "volume_path", node(&csipb.NodeExpandVolumeRequest{VolumeId: id, VolumePath: e.path("elsewhere")}))
	wantCode(t, "node: more than the engine has", codes.OutOfRange, "ControllerExpandVolume", node(&csipb.NodeExpandVolumeRequest{VolumeId: id, VolumePath: staging, CapacityRange: &csipb.CapacityRange{RequiredBytes: 1 << 30}}))
	e.unstage(t, id, staging)
	e.release(t, id)
}

// deviceBytes is the size of a device, through its node.
func deviceBytes(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
