package csi

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStageMountOptions: xfs is staged with nouuid, added once; other
// filesystems with the capability's flags as given.
func TestStageMountOptions(t *testing.T) {
	for _, tc := range []struct {
		fsType string
		flags  []string
		want   []string
	}{
		{"ext4", nil, nil},
		{"ext4", []string{"noatime"}, []string{"noatime"}},
		{"xfs", nil, []string{"nouuid"}},
		{"xfs", []string{"noatime"}, []string{"noatime", "nouuid"}},
		{"xfs", []string{"nouuid", "ro"}, []string{"nouuid", "ro"}},
	} {
		flags := slices.Clone(tc.flags)
		if got := stageMountOptions(tc.fsType, flags); !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: %v, want %v", tc.fsType, tc.flags, got, tc.want)
		}
		if !slices.Equal(flags, tc.flags) {
			t.Errorf("%s %v: the capability's flags were changed to %v", tc.fsType, tc.flags, flags)
		}
	}
}

// TestAnXFSCloneMountsBesideItsSource: a clone holds its source's xfs
// filesystem, UUID and all; staged on the source's node, it mounts only
// with nouuid. Two loop devices over an xfs image and its copy, mounted
// with the options the Node service stages with; the same without them
// is refused, which is what the option is for.
func TestAnXFSCloneMountsBesideItsSource(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: loop devices and mount")
	}
	for _, tool := range []string{"mkfs.xfs", "losetup", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	ctx := context.Background()
	dir := t.TempDir()
	source := filepath.Join(dir, "source.img")
	f, err := os.Create(source)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(320 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command("mkfs.xfs", "-q", source).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.xfs: %v: %s", err, out)
	}
	clone := filepath.Join(dir, "clone.img")
	if out, err := exec.Command("cp", "--sparse=always", source, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	loop := func(image string) string {
		out, err := exec.Command("losetup", "--find", "--show", image).Output()
		if err != nil {
			t.Fatalf("losetup %s: %v", image, err)
		}
		dev := strings.TrimSpace(string(out))
		t.Cleanup(func() { _ = exec.Command("losetup", "--detach", dev).Run() })
		return dev
	}
	mountAt := func(dev, name string, options []string) error {
		target := filepath.Join(dir, name)
		if err := os.Mkdir(target, 0o755); err != nil {
			t.Fatal(err)
		}
		err := mount(ctx, dev, target, "xfs", options)
		if err == nil {
			t.Cleanup(func() { _ = exec.Command("umount", target).Run() })
		}
		return err
	}
	// The source as it was staged before nouuid (or by another tool): its
	// UUID is the kernel's, and a second filesystem of it is refused.
	srcDev, cloneDev := loop(source), loop(clone)
	if err := mountAt(srcDev, "source", nil); err != nil {
		t.Fatalf("the source: %v", err)
	}
	if err := mountAt(cloneDev, "clone-bare", nil); err == nil {
		t.Fatal("the clone mounted beside its source without nouuid: the kernel no longer refuses a duplicate UUID, so this test proves nothing")
	}
	if err := mountAt(cloneDev, "clone", stageMountOptions("xfs", nil)); err != nil {
		t.Errorf("the clone beside its source, staged as the Node service stages it: %v", err)
	}
}
