package instancemanager

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
)

func needDevices(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("devices need root: nbdfuse mounts, losetup")
	}
	for _, tool := range device.Tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (nbdfuse, nbdinfo: libnbd-bin; losetup: util-linux)", tool)
		}
	}
}

func dialDevices(t *testing.T, dir string) *DeviceClient {
	t.Helper()
	c, err := DialDevices(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDevicesOverTheSocket: the CSI Node service's calls of the devices,
// on an engine's export in the same instance manager, with the device's
// errors found again on the caller's side; an instance manager started
// again after its engines stopped undoes their devices.
func TestDevicesOverTheSocket(t *testing.T) {
	needDevices(t)
	dir, data := t.TempDir(), t.TempDir()
	stop := serve(t, dir)
	im := dial(t, dir)
	devs := dialDevices(t, dir)
	ctx := context.Background()
	run, err := im.Start("vol", 8<<20, []instance.ReplicaDir{{Name: "r1", Dir: filepath.Join(data, "r1"), New: true}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := devs.Get(ctx, "vol"); !errors.Is(err, device.ErrNotFound) {
		t.Fatalf("Get before a stage: %v, want ErrNotFound", err)
	}
	st, err := devs.Stage(ctx, "vol", run.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Healthy || !strings.HasPrefix(st.Device, "/dev/loop") || st.Size != 8<<20 || !st.Window {
		t.Fatalf("staged: %+v", st)
	}
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", st.Device).Run() })
	f, err := os.OpenFile(st.Device, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("through the instance manager"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if again, err := devs.Stage(ctx, "vol", run.Endpoint); err != nil || again.Device != st.Device {
		t.Fatalf("the same stage again: %+v, %v", again, err)
	}
	if _, err := devs.Stage(ctx, "vol", "nbd://127.0.0.1:1/vol"); !errors.Is(err, device.ErrPrecondition) || !strings.Contains(err.Error(), "another export") {
		t.Fatalf("a stage of another endpoint: %v, want ErrPrecondition", err)
	}
	if _, err := devs.Stage(ctx, "../vol", run.Endpoint); !errors.Is(err, device.ErrInvalid) {
		t.Fatalf("a stage of no volume name: %v, want ErrInvalid", err)
	}
	fd, err := unix.Open(st.Device, unix.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := devs.Unstage(ctx, "vol"); !errors.Is(err, device.ErrInUse) {
		t.Fatalf("unstage of a device held open: %v, want ErrInUse", err)
	}
	unix.Close(fd)
	list, err := devs.List(ctx)
	if err != nil || len(list) != 1 || list[0].Device != st.Device || !list[0].Healthy {
		t.Fatalf("List: %+v, %v", list, err)
	}
	grown, err := devs.Expand(ctx, "vol")
	if err != nil || grown.Size != 8<<20 {
		t.Fatalf("Expand: %+v, %v", grown, err)
	}
	if err := devs.Unstage(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	if err := devs.Unstage(ctx, "vol"); err != nil {
		t.Fatalf("a second unstage: %v", err)
	}

	// A device whose instance manager stopped (its engine with it) is
	// undone by the next one.
	st, err = devs.Stage(ctx, "vol", run.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := devs.Get(ctx, "vol"); !errors.Is(err, device.ErrUnavailable) {
		t.Fatalf("Get while no instance manager answers: %v, want ErrUnavailable", err)
	}
	serve(t, dir)
	eventually(t, "the new instance manager answers", func() bool {
		_, err = devs.Get(ctx, "vol")
		return !errors.Is(err, device.ErrUnavailable)
	})
	if !errors.Is(err, device.ErrNotFound) {
		t.Fatalf("the device of a stopped engine after a new instance manager started: %v, want it undone", err)
	}
	file := filepath.Join(dir, devicesDir, "fuse", "vol", "disk")
	if out, _ := exec.Command("losetup", "-j", file).Output(); len(out) > 0 {
		t.Fatalf("loop devices left: %s", out)
	}
}
