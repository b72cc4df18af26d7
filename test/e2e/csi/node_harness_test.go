//go:build e2e

package csi

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// csiNodeEnv is the CSI driver's Node service of node-1, served on a unix
// socket as the kubelet reaches it, over a manager on the real control
// plane.
type csiNodeEnv struct {
	*framework.APIEnv
	node     csipb.NodeClient
	stateDir string
	// root holds the staging and target paths the test uses.
	root string
	stop func()
}

// newCSINodeEnv starts a manager and the driver's Node service. Its
// cleanup undoes every mount, loop device and nbdfuse the test left.
func newCSINodeEnv(t *testing.T) *csiNodeEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the Node service needs root: it runs losetup, mkfs and mount")
	}
	for _, tool := range []string{"nbdfuse", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node service makes a volume's device with nbdfuse (libnbd-bin) and a loop device (util-linux)", tool)
		}
	}
	// The manager reads the driver's stages there (trimFilesystem).
	stateDir := t.TempDir()
	e := &csiNodeEnv{APIEnv: framework.NewAPIEnv(t, func(o *app.DaemonOptions) { o.CSIStateDir = stateDir }), stateDir: stateDir, root: t.TempDir()}
	t.Cleanup(func() { cleanupCSINode(t, e.root, e.stateDir, e.devicesDir()) })
	e.startDriver(t)
	return e
}

// devicesDirOf is where the devices of e's volumes are made: the
// instance manager's devices folder when its engines run in one (the
// driver makes them there, framework.ServeCSI), else "".
func devicesDirOf(e *framework.APIEnv) string {
	if e.InstanceManagerDir == "" {
		return ""
	}
	return filepath.Join(e.InstanceManagerDir, "devices")
}

// devicesDir is where the env's devices (nbdfuse, its FUSE mount, the
// loop devices' files) are: the instance manager's folder, or the
// driver's state directory.
func (e *csiNodeEnv) devicesDir() string {
	if dir := devicesDirOf(e.APIEnv); dir != "" {
		return dir
	}
	return e.stateDir
}

// assertNothingLeft asserts the env's stages left no mount, loop device,
// nbdfuse or state file.
func (e *csiNodeEnv) assertNothingLeft(t *testing.T) {
	t.Helper()
	assertNothingLeft(t, e.stateDir, e.devicesDir(), e.root)
}

// startDriver starts (or starts again, as after a restart) the driver on
// the env's state directory.
func (e *csiNodeEnv) startDriver(t *testing.T) {
	t.Helper()
	sock, stop := framework.ServeCSI(t, e.APIEnv, csi.Options{NodeID: "node-1", StateDir: e.stateDir})
	conn := dialCSI(t, sock)
	e.stop = func() {
		conn.Close()
		stop()
	}
	e.node = csipb.NewNodeClient(conn)
}

// attachedVolume creates a volume of size and attaches it to node-1 with
// its NBD frontend.
func (e *csiNodeEnv) attachedVolume(t *testing.T, name, size string) {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"`+size+`","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, name, "attached with an endpoint", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
}

func (e *csiNodeEnv) path(name string) string { return filepath.Join(e.root, name) }

// mountCap and blockCap are the capabilities of a filesystem and a raw
// block volume, as a PersistentVolume's gives them.
func mountCap(fsType string, flags ...string) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func blockCap() *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

func (e *csiNodeEnv) stage(t *testing.T, id, staging string, c *csipb.VolumeCapability) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := e.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: c}); err != nil {
		t.Fatalf("NodeStageVolume %s: %v", id, err)
	}
}

func (e *csiNodeEnv) unstage(t *testing.T, id, staging string) {
	t.Helper()
	if _, err := e.node.NodeUnstageVolume(context.Background(), &csipb.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume %s: %v", id, err)
	}
}

func (e *csiNodeEnv) publish(t *testing.T, id, staging, target string, c *csipb.VolumeCapability, readOnly bool) {
	t.Helper()
	if _, err := e.node.NodePublishVolume(context.Background(), &csipb.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: c, Readonly: readOnly}); err != nil {
		t.Fatalf("NodePublishVolume %s at %s: %v", id, target, err)
	}
}

func (e *csiNodeEnv) unpublish(t *testing.T, id, target string) {
	t.Helper()
	if _, err := e.node.NodeUnpublishVolume(context.Background(), &csipb.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("NodeUnpublishVolume %s at %s: %v", id, target, err)
	}
}

// expectCode asserts a call's gRPC code and that its message says each
// fragment.
func expectCode(t *testing.T, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %s", err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(status.Convert(err).Message(), f) {
			t.Errorf("%q does not say %q", status.Convert(err).Message(), f)
		}
	}
}

// mountsUnder lists the mount points under any of dirs, deepest first.
func mountsUnder(t testing.TB, dirs ...string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := strings.ReplaceAll(fields[4], `\040`, " ")
		for _, d := range dirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				out = append(out, p)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// loopsUnder lists the loop devices whose file is under dir.
func loopsUnder(t testing.TB, dir string) []string {
	out, err := exec.Command("losetup", "--list", "--noheadings", "--raw", "-O", "NAME,BACK-FILE").Output()
	if err != nil {
		t.Logf("losetup --list: %v", err)
		return nil
	}
	var loops []string
	for _, line := range strings.Split(string(out), "\n") {
		name, file, ok := strings.Cut(strings.TrimSpace(line), " ")
		if ok && strings.HasPrefix(file, dir+"/") {
			loops = append(loops, name)
		}
	}
	return loops
}

// nbdfusesUnder lists the nbdfuse processes serving a file under dir.
func nbdfusesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if err == nil && filepath.Base(args[0]) == "nbdfuse" && strings.Contains(string(cmdline), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertNothingLeft asserts no mount, loop device, nbdfuse or state file
// of the driver's is left: its devices were made in devicesDir.
func assertNothingLeft(t *testing.T, stateDir, devicesDir string, dirs ...string) {
	t.Helper()
	if m := mountsUnder(t, append(dirs, stateDir, devicesDir)...); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	for _, dir := range []string{stateDir, devicesDir} {
		if l := loopsUnder(t, dir); len(l) > 0 {
			t.Errorf("loop devices left: %v", l)
		}
		framework.Eventually(t, 10*time.Second, "no nbdfuse left", func() (bool, error) { return len(nbdfusesUnder(dir)) == 0, nil })
	}
	if files, _ := filepath.Glob(filepath.Join(devicesDir, "*.json")); len(files) > 0 {
		t.Errorf("device records left: %v", files)
	}
	if files, _ := filepath.Glob(filepath.Join(stateDir, "volumes", "*.json")); len(files) > 0 {
		t.Errorf("state files left: %v", files)
	}
}

// cleanupCSINode undoes whatever a failed test left: mounts under root,
// then, under each of dirs (the state directory, the devices' folder),
// loop devices, then nbdfuse's mounts and processes.
func cleanupCSINode(t testing.TB, root string, dirs ...string) {
	for _, m := range mountsUnder(t, root) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("cleanup: unmount %s: %v", m, err)
		}
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		for _, l := range loopsUnder(t, dir) {
			if out, err := exec.Command("losetup", "-d", l).CombinedOutput(); err != nil {
				t.Logf("cleanup: losetup -d %s: %v: %s", l, err, out)
			}
		}
		for _, m := range mountsUnder(t, dir) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("cleanup: unmount %s: %v", m, err)
			}
		}
		for _, pid := range nbdfusesUnder(dir) {
			t.Logf("cleanup: stopping nbdfuse %d", pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}
