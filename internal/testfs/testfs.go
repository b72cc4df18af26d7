// Package testfs gives tests a small file system of their own, to see what
// the code does when a disk or a backup target is full.
package testfs

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Tmpfs mounts a tmpfs of size (such as "1m") on a new folder and unmounts
// it when the test ends. It needs root, as CI has; without it the test is
// skipped.
func Tmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

// Resize changes the size of a tmpfs made by Tmpfs, keeping its files.
func Resize(t *testing.T, dir, size string) {
	t.Helper()
	if out, err := exec.Command("mount", "-o", "remount,size="+size, dir).CombinedOutput(); err != nil {
		t.Fatal(fmt.Errorf("resize %s: %v: %s", dir, err, out))
	}
}
