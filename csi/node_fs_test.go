package csi

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNeedsFormat: a device is formatted only when it holds nothing at
// all; one with the filesystem asked for is mounted as it is; anything
// else is refused, naming what it holds.
func TestNeedsFormat(t *testing.T) {
	for _, tc := range []struct {
		name    string
		p       probe
		want    string
		format  bool
		refused string // a fragment of the refusal, "" when none
	}{
		{"blank", probe{Zero: true}, "ext4", true, ""},
		{"the filesystem asked for", probe{FsType: "ext4", Usage: "filesystem"}, "ext4", false, ""},
		{"xfs asked for and found", probe{FsType: "xfs", Usage: "filesystem"}, "xfs", false, ""},
		{"another filesystem", probe{FsType: "xfs", Usage: "filesystem"}, "ext4", false, "has a xfs filesystem and the capability asks for ext4"},
		{"data blkid does not know", probe{}, "ext4", false, "not blank"},
		{"written, ends blank", probe{Zero: true, Written: 65536}, "ext4", false, "65536 bytes of it have been written"},
		{"a backing image", probe{Zero: true, BackingImage: "debian"}, "ext4", false, "reads backing image debian"},
		{"a partition table", probe{PartTable: "dos"}, "ext4", false, "partition table (dos)"},
		{"swap", probe{FsType: "swap", Usage: "other"}, "ext4", false, "holds swap (other)"},
		{"LUKS", probe{FsType: "crypto_LUKS", Usage: "crypto"}, "ext4", false, "holds crypto_LUKS (crypto)"},
		{"ambiguous", probe{Ambiguous: true}, "ext4", false, "several signatures"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			format, err := needsFormat(tc.p, tc.want)
			if format != tc.format {
				t.Errorf("format %v, want %v", format, tc.format)
			}
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (!errors.Is(err, errDeviceInUse) || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("error %v, want errDeviceInUse saying %q", err, tc.refused)
			}
		})
	}
}

// TestProbeDevice runs blkid on real images: blank, ext4, swap, and data
// that is no filesystem, at the start or only at the end.
func TestProbeDevice(t *testing.T) {
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Skip("blkid is not installed")
	}
	dir := t.TempDir()
	image := func(name string, size int64) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			t.Fatal(err)
		}
		f.Close()
		return path
	}
	writeAt := func(path string, off int64, data string) {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte(data), off); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	check := func(path, want string, format bool) {
		t.Helper()
		p, err := probeDevice(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := needsFormat(p, "ext4")
		if got != format || (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: probe %+v: format %v, err %v; want format %v and an error saying %q", filepath.Base(path), p, got, err, format, want)
		}
	}

	check(image("blank", 8<<20), "", true)

	start := image("data-at-start", 8<<20)
	writeAt(start, 4096, "a database page")
	check(start, "not blank", false)

	end := image("data-at-end", 8<<20)
	writeAt(end, 8<<20-10, "the tail")
	check(end, "not blank", false)

	if _, err := exec.LookPath("mkfs.ext4"); err == nil {
		ext4 := image("ext4", 8<<20)
		if out, err := exec.Command("mkfs.ext4", "-q", "-F", ext4).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.ext4: %v: %s", err, out)
		}
		check(ext4, "", false)
	}
	if _, err := exec.LookPath("mkfs.xfs"); err == nil {
		// mkfs.xfs makes nothing under 300 MiB; sparse, it costs little.
		xfs := image("xfs", 300<<20)
		if out, err := exec.Command("mkfs.xfs", "-q", xfs).CombinedOutput(); err != nil {
			t.Fatalf("mkfs.xfs: %v: %s", err, out)
		}
		check(xfs, "has a xfs filesystem and the capability asks for ext4", false)
	}
	if _, err := exec.LookPath("mkswap"); err == nil {
		swap := image("swap", 8<<20)
		if out, err := exec.Command("mkswap", swap).CombinedOutput(); err != nil {
			t.Fatalf("mkswap: %v: %s", err, out)
		}
		check(swap, "holds swap", false)
	}
	// A DOS partition table: the boot signature and one partition entry.
	mbr := image("mbr", 8<<20)
	writeAt(mbr, 446, "\x00\x00\x02\x00\x83\x00\x00\x00\x00\x08\x00\x00\x00\x38\x00\x00")
	writeAt(mbr, 510, "\x55\xaa")
	check(mbr, "partition table (dos)", false)
}

// TestParseCapability: the capability's faults are InvalidArgument
// naming the field.
func TestParseCapability(t *testing.T) {
	mount := func(fs string) *csi.VolumeCapability {
		return &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}
	}
	for _, tc := range []struct {
		name string
		c    *csi.VolumeCapability
		want string
	}{
		{"none", nil, "volume_capability is missing"},
		{"unknown fs", mount("btrfs"), `volume_capability.mount.fs_type "btrfs"`},
		{"no access type", &csi.VolumeCapability{AccessMode: mount("").AccessMode}, "volume_capability.access_type"},
		{"no access mode", &csi.VolumeCapability{AccessType: mount("").AccessType}, "volume_capability.access_mode is missing"},
		{"multi-node", &csi.VolumeCapability{AccessType: mount("").AccessType, AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}, "MULTI_NODE_MULTI_WRITER"},
	} {
		_, err := parseCapability(tc.c)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument saying %q", tc.name, err, tc.want)
		}
	}
	nc, err := parseCapability(mount(""))
	if err != nil || nc.fsType != "ext4" {
		t.Errorf("no fs_type: %+v, %v; want ext4", nc, err)
	}
	if nc, err := parseCapability(mount("XFS")); err != nil || nc.fsType != "xfs" {
		t.Errorf("XFS: %+v, %v; want xfs", nc, err)
	}

	// The StorageClass's fsType, in the volume context, counts only when
	// the capability names none.
	for _, tc := range []struct{ capFs, ctxFs, want string }{
		{"", "xfs", "xfs"}, {"ext4", "xfs", "ext4"}, {"", "", "ext4"},
	} {
		c := mount(tc.capFs)
		nc, _ := parseCapability(c)
		nc, err := withContextFsType(nc, c, map[string]string{"fsType": tc.ctxFs})
		if err != nil || nc.fsType != tc.want {
			t.Errorf("capability %q, context %q: %q, %v; want %q", tc.capFs, tc.ctxFs, nc.fsType, err, tc.want)
		}
	}
	c := mount("")
	nc, _ = parseCapability(c)
	if _, err := withContextFsType(nc, c, map[string]string{"fsType": "ntfs"}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `volume_context.fsType "ntfs"`) {
		t.Errorf("context fsType ntfs: %v", err)
	}
}
