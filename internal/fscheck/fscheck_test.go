package fscheck

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestDetect(t *testing.T) {
	ext := make([]byte, HeadSize)
	binary.LittleEndian.PutUint16(ext[1024+56:], 0xEF53)
	xfs := append([]byte("XFSB"), make([]byte, HeadSize-4)...)
	for _, tc := range []struct {
		name string
		head []byte
		want string
	}{
		{"an ext superblock's magic at 1080 is ext4", ext, Ext4},
		{"XFSB at 0 is xfs", xfs, XFS},
		{"zeros are no filesystem", make([]byte, HeadSize), None},
		{"a head too short to hold a superblock is none", []byte("XF"), None},
		{"the ext magic one byte off is none", append([]byte{0}, ext[:HeadSize-1]...), None},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Detect(tc.head); got != tc.want {
				t.Fatalf("Detect = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   string
		code int
		want string
	}{
		{"e2fsck clean", Ext4, 0, longhorn.FilesystemCheckPassed},
		{"e2fsck errors left uncorrected", Ext4, 4, longhorn.FilesystemCheckFailed},
		{"e2fsck would have corrected errors", Ext4, 1, longhorn.FilesystemCheckFailed},
		{"e2fsck operational error alone is not a verdict", Ext4, 8, longhorn.FilesystemCheckError},
		{"e2fsck errors found, then aborted (a root inode cleared) is a damaged filesystem", Ext4, 12, longhorn.FilesystemCheckFailed},
		{"e2fsck cancelled is not a verdict", Ext4, 32, longhorn.FilesystemCheckError},
		{"xfs_repair clean", XFS, 0, longhorn.FilesystemCheckPassed},
		{"xfs_repair found corruption", XFS, 1, longhorn.FilesystemCheckFailed},
		{"xfs_repair could not check", XFS, 2, longhorn.FilesystemCheckError},
		{"no filesystem: skipped", None, 0, longhorn.FilesystemCheckSkipped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.fs, tc.code); got != tc.want {
				t.Fatalf("Classify(%s, %d) = %q, want %q", tc.fs, tc.code, got, tc.want)
			}
		})
	}
}

func TestSummariseKeepsTheCommandAndTheEnd(t *testing.T) {
	var out []string
	for i := 0; i < 40; i++ {
		out = append(out, strings.Repeat("x", 10)+" line")
	}
	out = append(out, "Bad magic number in super-block")
	s := Summarise("e2fsck -n -f /dev/loop3", 8, []byte(strings.Join(out, "\n")))
	if !strings.HasPrefix(s, "e2fsck -n -f /dev/loop3: exit 8\n[29 lines before]") || !strings.HasSuffix(s, "Bad magic number in super-block") {
		t.Fatalf("summary:\n%s", s)
	}
	long := Summarise("xfs_repair -n /dev/loop1", 1, []byte(strings.Repeat("y", 5000)))
	if len(long) > summaryBytes+64 {
		t.Fatalf("a summary of %d bytes", len(long))
	}
}

// TestCheckOnARealExt4Image: e2fsck -n passes a fresh filesystem and
// fails one whose root inode was cleared (debugfs -w), on image files.
func TestCheckOnARealExt4Image(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mkfs.ext4, debugfs and e2fsck (e2fsprogs)")
	}
	for _, tool := range []string{"mkfs.ext4", "debugfs", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: scripts/install-test-deps.sh installs e2fsprogs", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img, "8M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	head := make([]byte, HeadSize)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(head, 0)
	f.Close()
	if err != nil || Detect(head) != Ext4 {
		t.Fatalf("Detect of a fresh ext4 image: %q, %v", Detect(head), err)
	}
	if r := Check(context.Background(), Ext4, img); r.Check != longhorn.FilesystemCheckPassed {
		t.Fatalf("a fresh filesystem: %+v", r)
	}
	if out, err := exec.Command("debugfs", "-w", "-R", "clri <2>", img).CombinedOutput(); err != nil {
		t.Fatalf("debugfs: %v\n%s", err, out)
	}
	if r := Check(context.Background(), Ext4, img); r.Check != longhorn.FilesystemCheckFailed || !strings.Contains(r.Output, "Root inode") {
		t.Fatalf("a filesystem with its root inode cleared: %+v", r)
	}
}

// TestCheckOnARealXFSDevice: xfs_repair -n passes a fresh xfs and fails
// one whose root inode's mode was zeroed (xfs_db -x), each on a
// read-only loop device, as a full drill gives it.
func TestCheckOnARealXFSDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mkfs.xfs, xfs_db, xfs_repair (xfsprogs) and losetup")
	}
	if os.Geteuid() != 0 {
		t.Skip("makes a loop device: needs root")
	}
	for _, tool := range []string{"mkfs.xfs", "xfs_db", "xfs_repair", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: scripts/install-test-deps.sh installs xfsprogs", tool)
		}
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	sh := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// mkfs.xfs makes nothing under 300 MiB; the file is sparse.
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(320 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sh("mkfs.xfs", "-q", img)
	check := func() Result {
		t.Helper()
		dev := sh("losetup", "--find", "--show", "--read-only", img)
		defer sh("losetup", "-d", dev)
		head := make([]byte, HeadSize)
		d, err := os.Open(dev)
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.ReadAt(head, 0)
		d.Close()
		if err != nil || Detect(head) != XFS {
			t.Fatalf("Detect of the xfs device: %q, %v", Detect(head), err)
		}
		return Check(context.Background(), XFS, dev)
	}
	if r := check(); r.Check != longhorn.FilesystemCheckPassed {
		t.Fatalf("a fresh xfs: %+v", r)
	}
	root := strings.TrimPrefix(sh("xfs_db", "-c", "sb 0", "-c", "p rootino", img), "rootino = ")
	sh("xfs_db", "-x", "-c", "inode "+root, "-c", "write -d core.mode 0", img)
	if r := check(); r.Check != longhorn.FilesystemCheckFailed || !strings.Contains(r.Output, "xfs_repair -n") {
		t.Fatalf("an xfs whose root inode's mode was zeroed: %+v", r)
	}
}
