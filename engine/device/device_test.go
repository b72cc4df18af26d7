package device

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"
)

// memDevice is an export's bytes in memory, whose size a test grows.
type memDevice struct {
	mu   sync.Mutex
	data []byte
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off+int64(len(p)) > int64(len(d.data)) {
		return 0, syscall.ENOSPC
	}
	return copy(d.data[off:], p), nil
}

func (d *memDevice) Size() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(len(d.data))
}

func (d *memDevice) Sync() error { return nil }

func (d *memDevice) grow(n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.data = append(d.data, make([]byte, n-int64(len(d.data)))...)
}

func (d *memDevice) bytesAt(off, n int64) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.Clone(d.data[off : off+n])
}

// export serves a device of size bytes as "vol" and returns it, its NBD
// URI and a stop (also run when the test ends).
func export(t *testing.T, size int64) (*memDevice, string, func()) {
	t.Helper()
	dev := &memDevice{data: make([]byte, size)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := nbd.NewServer("vol", dev, logrus.NewEntry(log))
	go s.Serve(l)
	var once sync.Once
	stop := func() { once.Do(func() { s.Close() }) }
	t.Cleanup(stop)
	return dev, "nbd://" + l.Addr().String() + "/vol", stop
}

// newManager is a Manager on a folder of the test's, which must be able
// to make real devices: root, /dev/fuse, and the tools. Its cleanup undoes
// whatever a failed test left.
func newManager(t *testing.T) *Manager {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("devices need root: nbdfuse mounts, losetup")
	}
	for _, tool := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (nbdfuse, nbdinfo: libnbd-bin; losetup: util-linux)", tool)
		}
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	m, err := NewManager(t.TempDir(), logrus.NewEntry(logrus.StandardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sweep(t, m.Dir()) })
	return m
}

// sweep undoes what is left under dir: loop devices, mounts, nbdfuse.
func sweep(t *testing.T, dir string) {
	for _, f := range fuseFiles(dir) {
		for _, l := range loopsReading(f) {
			t.Logf("cleanup: losetup -d %s", l)
			_ = exec.Command("losetup", "-d", l).Run()
		}
		_ = unix.Unmount(filepath.Dir(f), unix.MNT_DETACH)
		for _, pid := range nbdfusesServing(f) {
			t.Logf("cleanup: kill nbdfuse %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func fuseFiles(dir string) []string {
	dirs, _ := os.ReadDir(filepath.Join(dir, "fuse"))
	var out []string
	for _, d := range dirs {
		if d.IsDir() {
			out = append(out, filepath.Join(dir, "fuse", d.Name(), fuseFileName))
		}
	}
	return out
}

// assertNothingLeft asserts no loop device, FUSE mount, nbdfuse or record
// of volume id is left in m's folder.
func assertNothingLeft(t *testing.T, m *Manager, id string) {
	t.Helper()
	file := filepath.Join(m.FuseDir(id), fuseFileName)
	if l := loopsReading(file); len(l) > 0 {
		t.Errorf("loop devices left: %v", l)
	}
	if isMountPoint(m.FuseDir(id)) {
		t.Errorf("FUSE mount left at %s", m.FuseDir(id))
	}
	if err := waitFor(10*time.Second, func() bool { return len(nbdfusesServing(file)) == 0 }); err != nil {
		t.Errorf("nbdfuse left: %v", nbdfusesServing(file))
	}
	if _, err := os.Stat(m.recordPath(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record left: %v", err)
	}
	if _, err := os.Stat(m.FuseDir(id)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("FUSE folder left: %v", err)
	}
}

func writeAt(t *testing.T, path string, data []byte, off int64) {
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

func readAt(t *testing.T, path string, n int, off int64) []byte {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
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

func TestStageWritesReachTheExportAndUnstageLeavesNothing(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	dev, uri, _ := export(t, 16<<20)
	st, err := m.Stage(ctx, "vol-a", uri)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Healthy || !loopPattern.MatchString(st.Device) || st.Size != 16<<20 || !st.Window || st.Endpoint != uri {
		t.Fatalf("staged: %+v", st)
	}
	data := bytes.Repeat([]byte("longhorn"), 512)
	writeAt(t, st.Device, data, 1<<20)
	if got := dev.bytesAt(1<<20, int64(len(data))); !bytes.Equal(got, data) {
		t.Fatal("the export does not hold what was written through the device")
	}

	// The same stage again is the same device; another endpoint is refused.
	again, err := m.Stage(ctx, "vol-a", uri)
	if err != nil || again.Device != st.Device {
		t.Fatalf("staged again: %+v, %v", again, err)
	}
	_, other, _ := export(t, 16<<20)
	if _, err := m.Stage(ctx, "vol-a", other); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "another export") {
		t.Fatalf("stage at another endpoint: %v, want ErrPrecondition naming it", err)
	}
	if got, err := m.Get(ctx, "vol-a"); err != nil || got.Device != st.Device || !got.Healthy {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if list, err := m.List(ctx); err != nil || len(list) != 1 || list[0].VolumeID != "vol-a" {
		t.Fatalf("List: %+v, %v", list, err)
	}

	// A device held open (as a mount holds it) is not removed.
	fd, err := unix.Open(st.Device, unix.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Unstage(ctx, "vol-a"); !errors.Is(err, ErrInUse) {
		t.Fatalf("unstage of a device held open: %v, want ErrInUse", err)
	}
	unix.Close(fd)
	if got, _ := m.Get(ctx, "vol-a"); !got.Healthy {
		t.Fatalf("the refused unstage changed the device: %+v", got)
	}

	if err := m.Unstage(ctx, "vol-a"); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, m, "vol-a")
	if err := m.Unstage(ctx, "vol-a"); err != nil {
		t.Fatalf("a second unstage: %v", err)
	}
	if _, err := m.Get(ctx, "vol-a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after unstage: %v, want ErrNotFound", err)
	}
}

func TestStageRefusesWhatCannotBeAVolumesExport(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	for _, c := range []struct{ id, endpoint string }{
		{"../etc", "nbd://127.0.0.1:1/vol"},
		{"Vol", "nbd://127.0.0.1:1/vol"},
		{"vol", "file:///etc/passwd"},
		{"vol", "nbd://127.0.0.1/vol"},
		{"vol", "nbd://127.0.0.1:1/vol/window"},
		{"vol", "nbd://127.0.0.1:1/vol?tls=off"},
	} {
		if _, err := m.Stage(ctx, c.id, c.endpoint); !errors.Is(err, ErrInvalid) {
			t.Errorf("Stage(%q, %q): %v, want ErrInvalid", c.id, c.endpoint, err)
		}
	}
	// An export nothing serves: the cause is said, nothing is left.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	_, err := m.Stage(ctx, "vol", "nbd://"+addr+"/vol")
	if err == nil || !strings.Contains(err.Error(), "nbdinfo") {
		t.Fatalf("stage of an export nothing serves: %v", err)
	}
	assertNothingLeft(t, m, "vol")
}

func TestADeviceWhoseExportStoppedIsNotHealthy(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	_, uri, stop := export(t, 8<<20)
	if _, err := m.Stage(ctx, "vol", uri); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := waitFor(10*time.Second, func() bool { st, _ := m.Get(ctx, "vol"); return !st.Healthy }); err != nil {
		t.Fatal("the device of an export that stopped still says healthy")
	}
	st, _ := m.Get(ctx, "vol")
	if !strings.Contains(st.Why, "no longer connected") {
		t.Fatalf("why: %q", st.Why)
	}
	if _, err := m.Stage(ctx, "vol", uri); !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "no longer stands") {
		t.Fatalf("stage over a device that no longer stands: %v", err)
	}
	if err := m.Unstage(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, m, "vol")
}

// A new process on the folder (an instance manager started again) adopts
// a device that stands and undoes what one that no longer stands left.
func TestRecoverAdoptsWhatStandsAndUndoesWhatDied(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	dev, uri, _ := export(t, 8<<20)
	standing, err := m.Stage(ctx, "standing", uri)
	if err != nil {
		t.Fatal(err)
	}
	_, uri2, _ := export(t, 8<<20)
	if _, err := m.Stage(ctx, "killed", uri2); err != nil {
		t.Fatal(err)
	}
	killed, _ := m.load("killed")
	if err := syscall.Kill(killed.NbdfusePID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(10*time.Second, func() bool { return !isOurNbdfuse(killed) }); err != nil {
		t.Fatal("nbdfuse does not end")
	}
	// A FUSE folder no record names (a process that died as it started).
	if err := os.MkdirAll(m.FuseDir("orphan"), 0o700); err != nil {
		t.Fatal(err)
	}

	again, err := NewManager(m.Dir(), m.log)
	if err != nil {
		t.Fatal(err)
	}
	again.Recover()
	got, err := again.Get(ctx, "standing")
	if err != nil || !got.Healthy || got.Device != standing.Device {
		t.Fatalf("the standing device after Recover: %+v, %v", got, err)
	}
	writeAt(t, got.Device, []byte("adopted"), 0)
	if !bytes.Equal(dev.bytesAt(0, 7), []byte("adopted")) {
		t.Fatal("the adopted device does not write to its export")
	}
	if _, err := again.Get(ctx, "killed"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the dead device after Recover: %v, want it undone", err)
	}
	assertNothingLeft(t, again, "killed")
	if _, err := os.Stat(again.FuseDir("orphan")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the orphan folder: %v", err)
	}
	if err := again.Unstage(ctx, "standing"); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, again, "standing")
}

func TestExpandGrowsTheDeviceInPlace(t *testing.T) {
	m := newManager(t)
	ctx := context.Background()
	dev, uri, _ := export(t, 8<<20)
	st, err := m.Stage(ctx, "vol", uri)
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, st.Device, []byte("the old end"), 8<<20-11)
	if got, err := m.Expand(ctx, "vol"); err != nil || got.Size != 8<<20 {
		t.Fatalf("expand before the export grew: %+v, %v", got, err)
	}
	dev.grow(24 << 20)
	got, err := m.Expand(ctx, "vol")
	if err != nil || got.Size != 24<<20 || got.Device != st.Device {
		t.Fatalf("expand: %+v, %v", got, err)
	}
	if !bytes.Equal(readAt(t, st.Device, 4096, 8<<20-4096)[4096-11:], []byte("the old end")) {
		t.Fatal("the old end reads other bytes")
	}
	writeAt(t, st.Device, []byte("the new end"), 24<<20-11)
	if !bytes.Equal(dev.bytesAt(24<<20-11, 11), []byte("the new end")) {
		t.Fatal("the new end does not reach the export")
	}
	if _, err := m.Expand(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("expand of no device: %v", err)
	}
	if err := m.Unstage(ctx, "vol"); err != nil {
		t.Fatal(err)
	}
	assertNothingLeft(t, m, "vol")
}
