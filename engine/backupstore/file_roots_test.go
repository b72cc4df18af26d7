package backupstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileRootsLayout makes a folder root that is the one file:// root, a
// folder outside it, and links in root: out (to outside), in (to
// root/sub) and proc (to /proc/1/root, the host's root from a pod that
// mounts the host's /proc).
func fileRootsLayout(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, dir := range []string{root, outside, filepath.Join(root, "sub")} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"out": outside, "in": filepath.Join(root, "sub"), "proc": "/proc/1/root"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func TestNewDriverConfinesFileTargets(t *testing.T) {
	root, outside := fileRootsLayout(t)
	roots, err := NewFileRoots([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	none, err := NewFileRoots(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, target string
		roots        *FileRoots
		// wantRoot is the folder the driver opens; wantErr a part of the
		// refusal when it is refused.
		wantRoot, wantErr string
	}{
		{"a folder in the root", "file://" + root + "/backups", roots, root + "/backups", ""},
		{"the root itself", "file://" + root + "/", roots, root, ""},
		{"localhost is this host", "file://localhost" + root + "/backups", roots, root + "/backups", ""},
		{"a link that stays in the root, resolved", "file://" + root + "/in/backups", roots, root + "/sub/backups", ""},
		{"a folder outside", "file://" + outside, roots, "", "is outside the folders file:// targets may use"},
		{"out of the root by ..", "file://" + root + "/../outside", roots, "", "is outside the folders"},
		{"a sibling whose name starts as the root's", "file://" + root + "2/backups", roots, "", "is outside the folders"},
		{"a link out of the root", "file://" + root + "/out/backups", roots, "", "which resolves to " + outside + "/backups"},
		{"a link in the root to /proc/1/root", "file://" + root + "/proc" + root, roots, "", "on a proc file system"},
		{"through /proc/1/root", "file:///proc/1/root" + root + "/backups", roots, "", "/proc is on a proc file system"},
		{"no roots: no file:// at all", "file://" + root + "/backups", none, "", "file:// targets are off on this manager"},
		{"unconfined (a test's or a tool's store)", "file://" + outside, nil, outside, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := newDriver(tc.target, nil, tc.roots)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("newDriver(%s) = %v, want an error with %q", tc.target, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("newDriver(%s): %v", tc.target, err)
			}
			if got := d.(*FileDriver).Root; got != tc.wantRoot {
				t.Fatalf("newDriver(%s) opened %s, want %s", tc.target, got, tc.wantRoot)
			}
		})
	}
}

func TestNewFileRootsRefusesKernelFileSystems(t *testing.T) {
	for _, tc := range []struct {
		root, wantErr string
	}{
		{"/proc", "on a proc file system"},
		{"/proc/1/root/var/backups", "on a proc file system"},
		{"/sys/fs", "on a sysfs file system"},
		{"var/backups", "is not an absolute path"},
	} {
		if _, err := NewFileRoots([]string{t.TempDir(), tc.root}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("NewFileRoots(%s) = %v, want an error with %q", tc.root, err, tc.wantErr)
		}
	}
}

// A link planted in a confined target after it was opened (by anyone
// who may write to the share) does not take a read or a write out of it.
func TestConfinedFileDriverRefusesPlantedLinks(t *testing.T) {
	root, outside := fileRootsLayout(t)
	roots, err := NewFileRoots([]string{root})
	if err != nil {
		t.Fatal(err)
	}
	d, err := newDriver("file://"+root+"/target", nil, roots)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write("backupstore/volumes/v/volume.cfg", []byte("{}")); err != nil {
		t.Fatalf("a write inside the target: %v", err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host file"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "target", "backupstore", "volumes", "w")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "target", "backupstore", "volumes", "v", "backups")); err != nil {
		t.Fatal(err)
	}
	const refused = "outside the backup target"
	if err := d.Write("backupstore/volumes/w/volume.cfg", []byte("{}")); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a write through a link out of the target = %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "volume.cfg")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the write through the link made a file outside the target: %v", err)
	}
	if _, err := d.Read("backupstore/volumes/v/backups", 1<<20); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a read of a link to a file outside the target = %v, want it refused", err)
	}
	if _, err := d.List("backupstore/volumes/w"); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a list through a link out of the target = %v, want it refused", err)
	}
	if _, err := d.Exists("backupstore/volumes/w/secret"); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("an exists through a link out of the target = %v, want it refused", err)
	}
	if err := d.Delete("backupstore/volumes/w/secret"); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a delete through a link out of the target = %v, want it refused", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the file outside the target: %v", err)
	}
	if _, err := d.(*FileDriver).newBatch("w", 1); err == nil || !strings.Contains(err.Error(), refused) {
		t.Errorf("a backup's staging through a link out of the target = %v, want it refused", err)
	}
}
