package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// headAllocated is the bytes the head's file has on disk.
func headAllocated(t *testing.T, r *Replica) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(r.dir, headFile(r.meta.HeadIndex)), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func readAll(t *testing.T, r *Replica, off, n int64) []byte {
	t.Helper()
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return buf
}

// Trim gives the head's space back, block by block within the range; a
// trimmed block reads what the layer below holds (a snapshot's data, or
// zeros), the same after a reopen; the snapshots keep their data, and
// what a later snapshot changed is still told right.
func TestTrimPunchesTheHeadAndReadsTheLayerBelow(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Close() }()
	old := bytes.Repeat([]byte{'o'}, 64<<10)
	if _, err := r.WriteAt(old, 0); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	// The head: 64 KiB over s1's, and 1 MiB where s1 has nothing.
	if _, err := r.WriteAt(bytes.Repeat([]byte{'n'}, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt(bytes.Repeat([]byte{'x'}, 1<<20), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	before := headAllocated(t, r)

	// Whole blocks only: the range starts and ends mid-block.
	if err := r.Trim(100, 2<<20); err != nil {
		t.Fatal(err)
	}
	after := headAllocated(t, r)
	if before-after < 1<<20 {
		t.Errorf("the head holds %d bytes after the trim, %d before: want at least 1 MiB given back", after, before)
	}
	check := func(when string) {
		t.Helper()
		if got := readAll(t, r, 0, 4096); !bytes.Equal(got[:100], bytes.Repeat([]byte{'n'}, 100)) || !bytes.Equal(got[100:], bytes.Repeat([]byte{'n'}, 4096-100)) {
			t.Errorf("%s: the block cut by the range's start was trimmed", when)
		}
		if got := readAll(t, r, 4096, 60<<10); !bytes.Equal(got, bytes.Repeat([]byte{'o'}, 60<<10)) {
			t.Errorf("%s: trimmed blocks over s1 do not read s1's data", when)
		}
		if got := readAll(t, r, 1<<20, 1<<20); !bytes.Equal(got, make([]byte, 1<<20)) {
			t.Errorf("%s: trimmed blocks over nothing do not read zeros", when)
		}
	}
	check("after the trim")

	// A snapshot taken now has changed only the one block the trim left.
	if err := r.CreateSnapshot("s2", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	changed, full, err := r.ChangedBlocks("s1", "s2")
	if err != nil || full {
		t.Fatalf("ChangedBlocks: %v, full %v", err, full)
	}
	for b, c := range changed {
		if c != (b == 0) {
			t.Errorf("block %d changed %v between s1 and s2", b, c)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	check("after a reopen")
}

// A block that falls back to a layer no block pointed at any more (it was
// closed at open) reads that layer's data: the layer is opened again.
func TestTrimReopensALayerThatWasShadowed(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt(bytes.Repeat([]byte{'a'}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt(bytes.Repeat([]byte{'b'}, 8192), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened: s1 is wholly shadowed by the head, so it is closed.
	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.chain[0] != nil {
		t.Fatal("s1 should be closed: no block reads it")
	}
	if err := r.Trim(0, 8192); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, r, 0, 8192); !bytes.Equal(got, bytes.Repeat([]byte{'a'}, 8192)) {
		t.Errorf("after the trim the blocks read %q..., want s1's data", got[:8])
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotFile("s1"))); err != nil {
		t.Fatal(err)
	}
	if err := r.Trim(0, 2<<20); err == nil {
		t.Error("a trim past the volume's end was taken")
	}
}

// fileAllocated is the bytes a file of the replica has on disk.
func fileAllocated(t *testing.T, r *Replica, file string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(r.dir, file), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

// A trim gives back the blocks of the snapshots already removed just
// below the head too (nothing but the head reads them), and reads what
// the newest snapshot kept holds; a removed snapshot under a kept one,
// and every kept snapshot, keep their data.
func TestTrimPunchesTheRemovedSnapshotsBelowTheHead(t *testing.T) {
	dir := t.TempDir()
	r, err := Create(dir, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Close() }()
	write := func(c byte, off, n int64) {
		t.Helper()
		if _, err := r.WriteAt(bytes.Repeat([]byte{c}, int(n)), off); err != nil {
			t.Fatal(err)
		}
	}
	snap := func(name string) {
		t.Helper()
		if err := r.CreateSnapshot(name, true, time.Now(), nil); err != nil {
			t.Fatal(err)
		}
	}
	// old (removed) < kept < gone1 (removed) < gone2 (removed) < head
	write('a', 2<<20, 256<<10)
	snap("old")
	write('k', 0, 64<<10)
	snap("kept")
	write('r', 0, 256<<10)
	write('z', 1<<20, 512<<10)
	snap("gone1")
	write('s', 1<<20, 128<<10)
	snap("gone2")
	write('h', 3<<20, 64<<10)
	for _, name := range []string{"old", "gone1", "gone2"} {
		if err := r.MarkRemoved(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	oldBefore, keptBefore := fileAllocated(t, r, snapshotFile("old")), fileAllocated(t, r, snapshotFile("kept"))
	gone1Before := fileAllocated(t, r, snapshotFile("gone1"))

	if err := r.Trim(0, 4<<20); err != nil {
		t.Fatal(err)
	}
	if got := fileAllocated(t, r, snapshotFile("gone1")); gone1Before-got < 700<<10 {
		t.Errorf("removed snapshot gone1 holds %d bytes after the trim, %d before: want its 768 KiB given back", got, gone1Before)
	}
	if got := fileAllocated(t, r, snapshotFile("gone2")); got >= 128<<10 {
		t.Errorf("removed snapshot gone2 holds %d bytes after the trim: want its 128 KiB given back", got)
	}
	if got := headAllocated(t, r); got >= 64<<10 {
		t.Errorf("the head holds %d bytes after the trim", got)
	}
	if got := fileAllocated(t, r, snapshotFile("kept")); got != keptBefore {
		t.Errorf("kept snapshot: %d bytes, %d before: a kept snapshot was trimmed", got, keptBefore)
	}
	if got := fileAllocated(t, r, snapshotFile("old")); got != oldBefore {
		t.Errorf("removed snapshot under a kept one: %d bytes, %d before: want it untouched", got, oldBefore)
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			off, n int64
			want   byte
			what   string
		}{
			{0, 64 << 10, 'k', "the kept snapshot's blocks"},
			{64 << 10, 192 << 10, 0, "blocks only removed snapshots held"},
			{1 << 20, 512 << 10, 0, "blocks only removed snapshots held"},
			{2 << 20, 256 << 10, 'a', "the blocks of old, under the kept snapshot"},
			{3 << 20, 64 << 10, 0, "the head's blocks"},
		} {
			if got := readAll(t, r, c.off, c.n); !bytes.Equal(got, bytes.Repeat([]byte{c.want}, int(c.n))) {
				t.Errorf("%s: %s at %d do not read %q", when, c.what, c.off, c.want)
			}
		}
		v, err := r.OpenSnapshot("kept")
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		for _, c := range []struct {
			off, n int64
			want   byte
		}{{0, 64 << 10, 'k'}, {64 << 10, 64 << 10, 0}, {2 << 20, 256 << 10, 'a'}} {
			got := make([]byte, c.n)
			if _, err := v.ReadAt(got, c.off); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{c.want}, int(c.n))) {
				t.Errorf("%s: the kept snapshot at %d does not read %q (%v)", when, c.off, c.want, err)
			}
		}
	}
	check("after the trim")
	r.Close()
	if r, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	check("after a reopen")
}
