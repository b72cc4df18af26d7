package replica

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestQcow2ReadersAreSharedPerFile: every opener of one qcow2 file reads
// through one reader (one L1 table, one set of caches), which stays open
// until the last handle closes; another file, or the same path rewritten,
// gets a reader of its own.
func TestQcow2ReadersAreSharedPerFile(t *testing.T) {
	const cs = 4096
	data := bytes.Repeat([]byte("qcow2 shared "), 3*cs/13+1)[:3*cs]
	img, _ := buildQcow2(t, testQcow2{version: 3, clusterBits: 12, data: data, compressed: map[int64]bool{1: true}})
	dir := t.TempDir()
	path := filepath.Join(dir, "image.qcow2")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	before := openQcow2s.len()
	open := func(p string) *qcow2Handle {
		t.Helper()
		r, err := openBacking(&BackingFile{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		h, ok := r.(*qcow2Handle)
		if !ok {
			t.Fatalf("a qcow2 file opened as %T, not a shared handle", r)
		}
		return h
	}

	a, b := open(path), open(path)
	if a.sharedQcow2 != b.sharedQcow2 {
		t.Fatal("two openers of one file got two readers")
	}
	if got := openQcow2s.len(); got != before+1 {
		t.Fatalf("%d readers open, want %d", got, before+1)
	}
	checkReads(t, a, data, cs)
	a.Close()
	a.Close() // a second Close of one handle releases nothing more
	checkReads(t, b, data, cs)

	other := filepath.Join(dir, "copy.qcow2")
	if err := os.WriteFile(other, img, 0o644); err != nil {
		t.Fatal(err)
	}
	c := open(other)
	if c.sharedQcow2 == b.sharedQcow2 {
		t.Fatal("another file shares the first file's reader")
	}
	c.Close()

	b.Close()
	if got := openQcow2s.len(); got != before {
		t.Fatalf("%d readers open after every handle closed, want %d", got, before)
	}
	if _, err := b.ReadAt(make([]byte, 1), 0); err == nil {
		t.Fatal("the reader still reads after its last handle closed: its file was not closed")
	}

	// The path rewritten with other content (a new inode): a new reader.
	d := open(path)
	defer d.Close()
	data2 := bytes.Repeat([]byte{0x42}, 3*cs)
	img2, _ := buildQcow2(t, testQcow2{version: 3, clusterBits: 12, data: data2})
	tmp := path + ".new"
	if err := os.WriteFile(tmp, img2, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	e := open(path)
	defer e.Close()
	if e.sharedQcow2 == d.sharedQcow2 {
		t.Fatal("a rewritten file shares the old file's reader")
	}
	checkReads(t, e, data2, cs)
	checkReads(t, d, data, cs)
}

// len is the number of qcow2 files open in the process.
func (g *qcow2Registry) len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.readers)
}
