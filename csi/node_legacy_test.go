package csi

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/nbd"
)

// memExport is an export's bytes in memory, whose size a test grows.
type memExport struct {
	mu   sync.Mutex
	data []byte
}

func (d *memExport) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *memExport) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off+int64(len(p)) > int64(len(d.data)) {
		return 0, syscall.ENOSPC
	}
	return copy(d.data[off:], p), nil
}

func (d *memExport) Size() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(len(d.data))
}

func (d *memExport) Sync() error { return nil }

func (d *memExport) grow(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.data = append(d.data, make([]byte, n-int64(len(d.data)))...)
}

// legacyStage stages an ext4 volume as the driver did before devices
// moved to engine/device: its own nbdfuse on the export's window in
// STATE/fuse/VOLUME, a loop device of its file, the filesystem mounted at
// staging, and the state file of that version (no deviceOwner).
func legacyStage(t *testing.T, stateDir, id, endpoint, staging string, size int64) *nodestate.Volume {
	t.Helper()
	dir := filepath.Join(stateDir, "fuse", id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "disk")
	cmd := exec.Command("nbdfuse", "-P", dir+".pid", file, endpoint+nbd.WindowSuffix)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { _ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); _ = unix.Unmount(dir, unix.MNT_DETACH) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(dir + ".pid"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nbdfuse does not serve its file")
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--sizelimit", strconv.FormatInt(size, 10), file).Output()
	if err != nil {
		t.Fatal(err)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	for _, argv := range [][]string{{"mkfs.ext4", "-q", "-E", "nodiscard", loop}, {"mount", "-t", "ext4", loop, staging}} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	t.Cleanup(func() { _ = unix.Unmount(staging, unix.MNT_DETACH) })
	st := &nodestate.Volume{VolumeID: id, Endpoint: endpoint, FuseDir: dir, FuseFile: file, NbdfusePID: cmd.Process.Pid, Window: true,
		Device: loop, StagingPath: staging, FsType: "ext4", Formatted: true}
	if err := nodestate.Save(stateDir, st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestALegacyStageIsServedGrownAndUndone: a stage the driver made before
// devices moved (its own nbdfuse, recorded in the state file) is taken as
// it stands by the new driver, whichever keeper it is given now: it is
// published, grown, and unstaged with its writes flushed to the engine,
// leaving no mount, loop device, nbdfuse or state.
func TestALegacyStageIsServedGrownAndUndone(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: nbdfuse mounts, loop devices, mount")
	}
	for _, tool := range append([]string{"mkfs.ext4", "mount"}, device.Tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	export := &memExport{data: make([]byte, 32<<20)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	quiet := logrus.New()
	quiet.SetLevel(logrus.PanicLevel)
	srv := nbd.NewServer("vol", export, logrus.NewEntry(quiet))
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	endpoint := "nbd://" + l.Addr().String() + "/vol"

	stateDir, root := t.TempDir(), t.TempDir()
	staging, target := filepath.Join(root, "staging"), filepath.Join(root, "target")
	if err := os.MkdirAll(staging, 0o750); err != nil {
		t.Fatal(err)
	}
	st := legacyStage(t, stateDir, "vol", endpoint, staging, 32<<20)

	d, err := NewDriver(nil, Options{NodeID: "node-1", StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	s := newNodeServer(d)
	ctx := context.Background()
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
	if _, err := s.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: "vol", StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability}); err != nil {
		t.Fatalf("publish of the legacy stage: %v", err)
	}
	data := bytes.Repeat([]byte("kept across the upgrade\n"), 4096)
	f, err := os.Create(filepath.Join(target, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	f.Close() // not synced: the unstage flushes it

	export.grow(48 << 20)
	_, err = s.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: "vol", VolumePath: staging})
	if n, _ := loopSize(st.Device); n != 48<<20 {
		t.Fatalf("the legacy device after NodeExpandVolume (%v): %d bytes, want 48 MiB", err, n)
	}

	if _, err := s.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "vol", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: "vol", StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage of the legacy stage: %v", err)
	}
	if m, _ := mountAt(staging); m != nil {
		t.Errorf("the staging path is still mounted: %+v", m)
	}
	if m, _ := mountAt(st.FuseDir); m != nil {
		t.Errorf("the legacy nbdfuse is still mounted: %+v", m)
	}
	if out, _ := exec.Command("losetup", "-j", st.FuseFile).Output(); len(out) > 0 {
		t.Errorf("loop devices left: %s", out)
	}
	if got, _ := nodestate.Load(stateDir, "vol"); got != nil {
		t.Errorf("state left: %+v", got)
	}
	if err := waitFor(10*time.Second, func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(st.NbdfusePID)); return err != nil }); err != nil {
		t.Errorf("the legacy nbdfuse (%d) runs on", st.NbdfusePID)
	}

	// Everything written reached the engine: a new device reads it.
	m, err := device.NewManager(t.TempDir(), logrus.NewEntry(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := m.Stage(ctx, "vol", endpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Unstage(ctx, "vol") })
	check := filepath.Join(root, "check")
	if err := os.MkdirAll(check, 0o750); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "ext4", "-o", "ro", ds.Device, check).CombinedOutput(); err != nil {
		t.Fatalf("mount the volume again: %v: %s", err, out)
	}
	defer unix.Unmount(check, 0)
	if got, err := os.ReadFile(filepath.Join(check, "data")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file written before the unstage: %d bytes, %v", len(got), err)
	}
}

// waitFor polls cond every 50ms for up to timeout.
func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return os.ErrDeadlineExceeded
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
