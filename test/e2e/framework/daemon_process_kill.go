package framework

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/testtime"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// Kill sends the daemon SIGKILL, as an out-of-memory kill or a crash
// would end it, and waits until it is gone: it stops nothing of its own.
// Launch starts it again.
func (d *DaemonProcess) Kill(t testing.TB) {
	t.Helper()
	select {
	case err := <-d.done:
		t.Fatalf("the daemon had exited by itself: %v (log %s)", err, d.logPath)
	default:
	}
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-d.done
}

// DataDir is the daemon's --data-dir.
func (d *DaemonProcess) DataDir() string {
	i := slices.Index(d.args, "--data-dir")
	return d.args[i+1]
}

// LogPath is the file the daemon's current run logs to.
func (d *DaemonProcess) LogPath() string { return d.logPath }

// InstanceManagerPID is the pid of the instance manager that the daemon of
// dataDir runs with --instance-manager-runner=process, as its pid file
// says, when that process runs; 0 otherwise.
func InstanceManagerPID(t testing.TB, dataDir string) int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, "instance-manager", "instance-manager.pid"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatalf("instance manager pid file of %s: %v", dataDir, err)
	}
	// A pid file left behind may name a pid reused since by another program.
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if !running(pid) || !bytes.Contains(cmdline, []byte("instance-manager")) {
		return 0
	}
	return pid
}

// StopInstanceManager ends the instance manager of dataDir, which outlives
// its daemon by design, so that no process outlives the test: SIGTERM,
// then SIGKILL (and a failure) if it has not exited within 30 seconds.
func StopInstanceManager(t testing.TB, dataDir string) {
	t.Helper()
	pid := InstanceManagerPID(t, dataDir)
	if pid == 0 {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(testtime.Scale(30 * time.Second))
	for running(pid) {
		if time.Now().After(deadline) {
			t.Errorf("the instance manager (pid %d) did not exit within 30s of SIGTERM; killing it", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// running says whether pid runs. The instance manager is no child of the
// test's: once it exits it may stay a zombie until its new parent reaps it.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] != 'Z' && stat[i+2] != 'X'
}

// BuildManagerVersion builds longhorn-manager with version as its
// --version (main.Version) into the test's temporary folder: a newer
// build, for a test that replaces a running manager with it.
func BuildManagerVersion(t testing.TB, version string) string {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "longhorn-manager-"+version)
	build := exec.Command("go", "build", "-ldflags", "-X main.Version="+version, "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v: %s", err, out)
	}
	return bin
}

// UseBinary makes the daemon's next Launch run bin.
func (d *DaemonProcess) UseBinary(bin string) { d.args[0] = bin }
