package fstrim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/internal/mountinfo"
)

const table = `22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw
95 29 7:3 / /var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/abc/globalmount rw,relatime shared:50 - ext4 /dev/loop3 rw
96 29 7:3 / /var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount rw,relatime shared:50 - ext4 /dev/loop3 rw
97 29 7:4 / /mnt/with\040space rw - xfs /dev/loop4 rw
98 29 7:5 / /tmp/short
`

func TestPickMount(t *testing.T) {
	mounts, _ := mountinfo.Parse(strings.NewReader(table))
	global := "/var/lib/kubelet/plugins/kubernetes.io/csi/driver.longhorn.io/abc/globalmount"
	pod := "/var/lib/kubelet/pods/p1/volumes/kubernetes.io~csi/pvc-1/mount"
	for _, c := range []struct {
		name, device, number, staging, want string
	}{
		{"the staging path first", "/dev/loop3", "7:3", pod, pod},
		{"else the first mount of the device", "/dev/loop3", "7:3", "/gone", global},
		{"by name when the number is unknown", "/dev/loop4", "", "", "/mnt/with space"},
		{"by number whatever the name", "/dev/other-name", "7:3", global, global},
		{"a device mounted nowhere", "/dev/loop9", "7:9", "/x", ""},
	} {
		if got := pickMount(mounts, c.device, c.number, c.staging); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestTrimmedBytes(t *testing.T) {
	if n := trimmedBytes("/var/lib/x: 64 MiB (67108864 bytes) trimmed\n"); n != 67108864 {
		t.Errorf("got %d", n)
	}
	if n := trimmedBytes("nothing said"); n != 0 {
		t.Errorf("got %d", n)
	}
}

// A volume with no filesystem here is refused before anything runs, with
// a reason: not staged, staged as a block device, its device mounted
// nowhere; a name that is no volume's is refused too.
func TestTrimRefusesWithoutAMountedFilesystem(t *testing.T) {
	dir := t.TempDir()
	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "1/mountinfo"), []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []*nodestate.Volume{
		{VolumeID: "raw", Device: "/dev/loop7", Block: true},
		{VolumeID: "unmounted", Device: "/dev/loop9", StagingPath: "/staging/unmounted", FsType: "ext4"},
	} {
		if err := nodestate.Save(dir, v); err != nil {
			t.Fatal(err)
		}
	}
	tr := Trimmer{StateDir: dir, HostProc: proc}
	for volume, want := range map[string]string{
		"never-staged": "is not staged by the CSI driver on this node",
		"raw":          "is staged as a raw block device",
		"unmounted":    "is mounted nowhere on this node",
	} {
		_, err := tr.Trim(context.Background(), volume)
		if !errors.Is(err, ErrNoFilesystem) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrNoFilesystem saying %q", volume, err, want)
		}
	}
	if _, err := tr.Trim(context.Background(), "../etc"); err == nil || errors.Is(err, ErrNoFilesystem) {
		t.Errorf("a name that is no volume's: %v", err)
	}
}
