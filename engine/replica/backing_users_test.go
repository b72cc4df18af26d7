package replica

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBackingFileUsers: the replicas that start from a backing file are
// found by their own records, whether open or not; a replica on another
// file, one without a file, and a folder with no record are not users; a
// folder whose record is corrupt is counted, saying why.
func TestBackingFileUsers(t *testing.T) {
	disk := t.TempDir()
	replicas := filepath.Join(disk, "replicas")
	file := func(name string) BackingFile {
		path := filepath.Join(disk, "backing-images", name, "backing")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		return BackingFile{Path: path, Name: name, FileSize: 1 << 20}
	}
	img, other := file("img-u1"), file("other-u2")
	if users, err := BackingFileUsers(replicas, img.Path); err != nil || users != nil {
		t.Fatalf("a disk with no replicas folder: %v, %v", users, err)
	}
	for name, b := range map[string]*BackingFile{"open-r": &img, "closed-r": &img, "other-r": &other, "plain-r": nil} {
		var r *Replica
		var err error
		if b == nil {
			r, err = Create(filepath.Join(replicas, name), 4<<20)
		} else {
			r, err = CreateOnBacking(filepath.Join(replicas, name), 4<<20, *b)
		}
		if err != nil {
			t.Fatal(err)
		}
		if name == "open-r" {
			t.Cleanup(func() { r.Close() })
		} else {
			r.Close()
		}
	}
	if err := os.MkdirAll(filepath.Join(replicas, "never-created"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(replicas, "corrupt-r"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(replicas, "corrupt-r", volumeMetaFile), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	users, err := BackingFileUsers(replicas, img.Path)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 3 || users[0] != "closed-r" || !strings.HasPrefix(users[1], "corrupt-r (its record cannot be read") || users[2] != "open-r" {
		t.Fatalf("users of %s: %q", img.Path, users)
	}
	users, err = BackingFileUsers(replicas, other.Path)
	if err != nil || !slices.Contains(users, "other-r") || slices.Contains(users, "open-r") {
		t.Fatalf("users of %s: %q, %v", other.Path, users, err)
	}
}
