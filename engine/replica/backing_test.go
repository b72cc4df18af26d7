package replica

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// newBackingFile writes a raw backing file of n random bytes (not a
// multiple of the block size, so its last block is partial).
func newBackingFile(t *testing.T, n int) (BackingFile, []byte) {
	t.Helper()
	data := fill(99, n)
	path := filepath.Join(t.TempDir(), "backing")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return BackingFile{Path: path, Name: "img", Checksum: strings.Repeat("a", 128)}, data
}

func newReplicaOnBacking(t *testing.T, b BackingFile) (*Replica, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "replica")
	r, err := CreateOnBacking(dir, testSize, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

// TestBackingFileIsTheBottomOfTheChain: blocks no layer holds read from
// the backing file (zeros past its end), writes, snapshots, purges and a
// revert keep the layered view, and the backing file never changes.
func TestBackingFileIsTheBottomOfTheChain(t *testing.T) {
	b, base := newBackingFile(t, 3<<20+1000)
	r, dir := newReplicaOnBacking(t, b)

	want := make([]byte, testSize)
	copy(want, base)
	if got := image(t, r); !bytes.Equal(got, want) {
		t.Fatal("a new replica does not read its backing file")
	}

	// A write of part of a block keeps the rest of the block from the
	// backing file; a write past the backing file's end reads zeros around.
	write(t, r, 5000, []byte("hello"))
	copy(want[5000:], "hello")
	write(t, r, 3<<20+900, []byte("tail"))
	copy(want[3<<20+900:], "tail")
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	atS1 := bytes.Clone(want)
	// Zeros written over backing data stay zeros: the layer holds them.
	write(t, r, 1<<20, make([]byte, 8192))
	clear(want[1<<20 : 1<<20+8192])
	must(t, r.CreateSnapshot("s2", true, t0, nil))
	atS2 := bytes.Clone(want)
	write(t, r, 2<<20, []byte("head"))
	copy(want[2<<20:], "head")

	if got := image(t, r); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read its layers over the backing file")
	}
	if got := snapshotImage(t, r, "s1"); !bytes.Equal(got, atS1) {
		t.Fatal("snapshot s1 does not read its layers over the backing file")
	}

	// Purging s1 merges it into s2; what s2 and the head read is unchanged.
	must(t, r.MarkRemoved("s1"))
	if _, err := r.Purge(); err != nil {
		t.Fatal(err)
	}
	if got := snapshotImage(t, r, "s2"); !bytes.Equal(got, atS2) {
		t.Fatal("a purge changed what s2 reads over the backing file")
	}
	if got := image(t, r); !bytes.Equal(got, want) {
		t.Fatal("a purge changed what the volume reads over the backing file")
	}

	// Reopened, the replica finds its backing file again.
	must(t, r.Close())
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if got := image(t, r); !bytes.Equal(got, want) {
		t.Fatal("a reopened replica reads differently")
	}
	if got := r.Backing(); got == nil || got.Name != "img" || got.FileSize != int64(len(base)) {
		t.Fatalf("Backing() = %+v, want the image with its file size", got)
	}
	must(t, r.Revert("s2"))
	if got := image(t, r); !bytes.Equal(got, atS2) {
		t.Fatal("a revert does not read s2 over the backing file")
	}

	// Backups read only what the layers hold: the backing blocks are not
	// among the allocated ones.
	changed, full, err := r.ChangedBlocks("", "s2")
	if err != nil || !full {
		t.Fatalf("ChangedBlocks: %v, full %v", err, full)
	}
	for blk, c := range changed {
		inLayer := blk == 5000/BlockSize || blk == (3<<20+900)/BlockSize || blk >= (1<<20)/BlockSize && blk < (1<<20+8192)/BlockSize
		if c != inLayer {
			t.Fatalf("block %d: changed %v, want %v", blk, c, inLayer)
		}
	}

	if got, err := os.ReadFile(b.Path); err != nil || !bytes.Equal(got, base) {
		t.Fatal("the backing file was modified")
	}
}

// TestSnapshotViewOutlivesTheReplica: a view keeps its own reader of the
// backing file.
func TestSnapshotViewOutlivesTheReplica(t *testing.T) {
	b, base := newBackingFile(t, 1<<20)
	r, _ := newReplicaOnBacking(t, b)
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	v, err := r.OpenSnapshot("s1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	must(t, r.Close())
	got := make([]byte, 4096)
	if _, err := v.ReadAt(got, 8192); err != nil || !bytes.Equal(got, base[8192:8192+4096]) {
		t.Fatalf("view read after the replica closed: %v", err)
	}
}

func TestBackingFileRefusals(t *testing.T) {
	b, _ := newBackingFile(t, 1<<20)

	t.Run("volume smaller than the image", func(t *testing.T) {
		_, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), 512<<10, b)
		if err == nil || !strings.Contains(err.Error(), "smaller than its backing image img") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		missing := b
		missing.Path = filepath.Join(t.TempDir(), "nothing")
		dir := filepath.Join(t.TempDir(), "r")
		if _, err := CreateOnBacking(dir, testSize, missing); !errors.Is(err, ErrBackingFile) {
			t.Fatalf("err = %v, want ErrBackingFile", err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatal("a refused replica left its folder behind")
		}
	})
	t.Run("another file in its place", func(t *testing.T) {
		own, _ := newBackingFile(t, 1<<20)
		r, dir := newReplicaOnBacking(t, own)
		must(t, r.Close())
		if err := os.WriteFile(own.Path, fill(1, 1<<20+4096), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		if !errors.Is(err, ErrBackingFile) || !strings.Contains(err.Error(), "not the same file") {
			t.Fatalf("err = %v, want the file refused", err)
		}
	})
	t.Run("backing file gone", func(t *testing.T) {
		own, _ := newBackingFile(t, 1<<20)
		r, dir := newReplicaOnBacking(t, own)
		must(t, r.Close())
		must(t, os.Remove(own.Path))
		if _, err := Open(dir); !errors.Is(err, ErrBackingFile) {
			t.Fatalf("err = %v, want ErrBackingFile", err)
		}
	})
	t.Run("a folder, not a file", func(t *testing.T) {
		dirAsFile := b
		dirAsFile.Path = t.TempDir()
		if _, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), testSize, dirAsFile); !errors.Is(err, ErrBackingFile) {
			t.Fatalf("err = %v, want ErrBackingFile", err)
		}
	})
}
