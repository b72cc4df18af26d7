//go:build e2e

package csi

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestCSINodeDevicesOutliveTheDriver: with the engines in an instance
// manager, the staged volume's device is made there, so the end of the
// CSI driver's container (the driver and every process it started killed
// with SIGKILL, as the kubelet's restart of the container or a rollout of
// its DaemonSet does) stops no I/O: the mounted filesystem stays readable
// and writable, with no error and its data verified, the driver started
// again takes the stage as it is, and an unstage then leaves nothing.
func TestCSINodeDevicesOutliveTheDriver(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Node service needs root: it runs losetup, mkfs and mount")
	}
	for _, tool := range []string{"nbdfuse", "nbdinfo", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the instance manager makes a volume's device with nbdfuse (libnbd-bin) and a loop device (util-linux)", tool)
		}
	}
	stateDir := t.TempDir()
	api := framework.NewAPIEnv(t, framework.InstanceManagerProcess(t), func(o *app.DaemonOptions) { o.CSIStateDir = stateDir })
	e := &csiNodeEnv{APIEnv: api, stateDir: stateDir, root: t.TempDir()}
	if e.InstanceManagerDir == "" {
		t.Fatal("the daemon runs no instance manager")
	}
	t.Cleanup(func() { cleanupCSINode(t, e.root, e.stateDir, e.devicesDir()) })
	driver := startDriverProcess(t, e)

	const id = "survivor"
	e.attachedVolume(t, id, "64Mi")
	staging, target := e.path("staging"), e.path("target")
	e.stage(t, id, staging, mountCap("ext4"))
	e.publish(t, id, staging, target, mountCap("ext4"), false)
	before := randomBytes(t, 1<<20)
	writeSynced(t, filepath.Join(target, "before.bin"), before)
	fuses := nbdfusesUnder(e.devicesDir())
	if len(fuses) != 1 {
		t.Fatalf("nbdfuse processes of the stage in the instance manager's folder: %v", fuses)
	}
	if len(nbdfusesUnder(e.stateDir)) != 0 {
		t.Fatal("the driver made a device of its own")
	}

	// The driver's container ends.
	killed := killTree(t, driver.Process.Pid)
	_ = driver.Wait()
	for _, pid := range killed {
		if pid == fuses[0] {
			t.Fatalf("the device's nbdfuse (%d) was the driver's", pid)
		}
	}
	if got := nbdfusesUnder(e.devicesDir()); len(got) != 1 || got[0] != fuses[0] {
		t.Fatalf("nbdfuse after the driver was killed: %v, want %v", got, fuses)
	}
	// Read from the volume, not the page cache; written and synced again.
	dropCaches(t)
	readVerified(t, filepath.Join(target, "before.bin"), before)
	during := randomBytes(t, 1<<20)
	writeSynced(t, filepath.Join(target, "during.bin"), during)
	dropCaches(t)
	readVerified(t, filepath.Join(target, "during.bin"), during)

	// The driver started again finds the stage standing and keeps it.
	driver = startDriverProcess(t, e)
	e.stage(t, id, staging, mountCap("ext4"))
	e.publish(t, id, staging, target, mountCap("ext4"), false)
	if got := nbdfusesUnder(e.devicesDir()); len(got) != 1 || got[0] != fuses[0] {
		t.Fatalf("nbdfuse after the driver started again: %v, want %v", got, fuses)
	}
	after := randomBytes(t, 1<<20)
	writeSynced(t, filepath.Join(target, "after.bin"), after)
	e.unpublish(t, id, target)
	e.unstage(t, id, staging)
	e.assertNothingLeft(t)

	// All of it is in the volume: staged anew, it reads back.
	e.stage(t, id, staging, mountCap("ext4"))
	for name, want := range map[string][]byte{"before.bin": before, "during.bin": during, "after.bin": after} {
		readVerified(t, filepath.Join(staging, name), want)
	}
	e.unstage(t, id, staging)
	e.assertNothingLeft(t)
	_ = driver.Process.Signal(syscall.SIGTERM)
}

// startDriverProcess runs the built longhorn-manager's CSI Node service as
// a process of its own, as its container does, with the devices made by
// the daemon's instance manager; it points e's Node client at it.
func startDriverProcess(t *testing.T, e *csiNodeEnv) *exec.Cmd {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi-proc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "csi.sock")
	cmd := exec.Command(framework.ManagerBinary(t), "csi", "--endpoint", "unix://"+sock, "--node-id", "node-1",
		"--manager-url", e.Base+"/v1", "--state-dir", e.stateDir, "--instance-manager-dir", e.InstanceManagerDir)
	// Outside a cluster: no kubeconfig, no token.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			t.Logf("the CSI driver's log:\n%s", out)
		}
	})
	framework.Eventually(t, 30*time.Second, "the CSI driver's socket", func() (bool, error) {
		_, err := os.Stat(sock)
		return err == nil, nil
	})
	e.node = csipb.NewNodeClient(dialCSI(t, sock))
	return cmd
}

// killTree kills pid and every process descending from it with SIGKILL,
// as a container's end does, and returns them.
func killTree(t *testing.T, pid int) []int {
	t.Helper()
	tree := []int{pid}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, childrenOf(tree[i])...)
	}
	for _, p := range tree {
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Logf("kill %d: %v", p, err)
		}
	}
	return tree
}

func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range entries {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + ent.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func writeSynced(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func readVerified(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s reads %d bytes other than the %d written", path, len(got), len(want))
	}
}

// dropCaches has the kernel drop its clean page cache, so that what is
// read next comes from the device.
func dropCaches(t *testing.T) {
	t.Helper()
	syscall.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0); err != nil {
		t.Logf("drop caches: %v (the reads may come from the page cache)", err)
	}
}
