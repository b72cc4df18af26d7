package nbd

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The window export advertises WindowSize; the device's bytes read as
// they are, the rest as zeros, and a write past the device's end is
// refused; once the device grows, the new range takes writes.
func TestTheWindowExportCoversGrowth(t *testing.T) {
	r, addr := serveWith(t, func(*Server) {})
	window := "nbd://" + addr + "/vol" + WindowSuffix
	if out := strings.TrimSpace(run(t, "nbdinfo", "--size", window)); out != strconv.Itoa(WindowSize) {
		t.Fatalf("window size %q, want %d", out, WindowSize)
	}
	if out := strings.TrimSpace(run(t, "nbdinfo", "--size", "nbd://"+addr+"/vol")); out != strconv.Itoa(size) {
		t.Fatalf("plain export size %q, want the device's %d", out, size)
	}
	run(t, "qemu-io", "-f", "raw", window, "-c", "write -P 0xab 0 1M", "-c", "read -P 0xab 0 1M",
		"-c", "read -P 0 "+strconv.Itoa(size-4096)+" 8k", "-c", "read -P 0 1T 4k")
	out, _ := exec.Command(tool(t, "qemu-io"), "-f", "raw", window, "-c", "write -P 0xcd "+strconv.Itoa(size)+" 4k").CombinedOutput()
	if !strings.Contains(string(out), "No space left") {
		t.Fatalf("a write past the device's end on the window: %s", out)
	}
	if err := r.Grow(2 * size); err != nil {
		t.Fatal(err)
	}
	run(t, "qemu-io", "-f", "raw", window, "-c", "write -P 0xcd "+strconv.Itoa(size)+" 4k", "-c", "read -P 0xcd "+strconv.Itoa(size)+" 4k")
	if out := strings.TrimSpace(run(t, "nbdinfo", "--size", "nbd://"+addr+"/vol")); out != strconv.Itoa(2*size) {
		t.Fatalf("plain export size after growing %q, want %d", out, 2*size)
	}
	if out, err := exec.Command(tool(t, "nbdinfo"), "--size", "nbd://"+addr+"/other").CombinedOutput(); err == nil {
		t.Fatalf("an unknown export was served: %s", out)
	}
}
