package backupstore

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"
)

// halfRandom is data half random, half compressible text.
func halfRandom(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b[:n/2])
	copy(b[n/2:], bytes.Repeat([]byte("longhorn backup "), n/32+1))
	return b
}

// TestEveryCompressionRestoresAndMethodsMix: each method restores byte for
// byte; a volume whose method changes gets a backup that reads what it
// must (no block stored one way is read the other), and deleting backups
// of either method frees exactly the blocks of that method.
func TestEveryCompressionRestoresAndMethodsMix(t *testing.T) {
	s, root := newStore(t)
	data := halfRandom(1, 3*BlockSize)
	var names []string
	for i, method := range []string{CompressionGzip, CompressionLZ4, CompressionNone, ""} {
		info, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}, Compression: method, Concurrency: 1 + i})
		if err != nil {
			t.Fatalf("%q: %v", method, err)
		}
		want := method
		if want == "" {
			want = CompressionLZ4
		}
		if info.Compression != want {
			t.Fatalf("backup with %q records %q", method, info.Compression)
		}
		if method == "" && st.BlocksUploaded != 0 {
			t.Fatalf("a second lz4 backup of the same data uploaded %d blocks", st.BlocksUploaded)
		}
		got, err := restoreBytes(s, "vol", info.Name, len(data))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%q does not restore: %v", method, err)
		}
		names = append(names, info.Name)
	}
	if n := countBlocks(t, root); n != 9 {
		t.Fatalf("%d block files, want 3 per method", n)
	}
	if err := s.Delete("vol", names[1]); err != nil { // one of two lz4 backups
		t.Fatal(err)
	}
	if n := countBlocks(t, root); n != 9 {
		t.Fatalf("%d block files after deleting a backup whose blocks another uses", n)
	}
	if err := s.Delete("vol", names[0]); err != nil { // the gzip one
		t.Fatal(err)
	}
	if n := countBlocks(t, root); n != 6 {
		t.Fatalf("%d block files after deleting the gzip backup, want 6", n)
	}
	for _, name := range names[2:] {
		if got, err := restoreBytes(s, "vol", name, len(data)); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s after the deletions: %v", name, err)
		}
	}
	if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}, Compression: "zstd"}); err == nil || !strings.Contains(err.Error(), "lz4, gzip or none") {
		t.Fatalf("an unknown method: %v", err)
	}
}

// TestABlockThatExpandsPastItsPlaceIsRefused: a stored block that
// decompresses to more than the volume has room for is corrupt.
func TestABlockThatExpandsPastItsPlaceIsRefused(t *testing.T) {
	for _, method := range []string{CompressionGzip, CompressionLZ4, CompressionNone} {
		var buf bytes.Buffer
		z, err := compress(method, make([]byte, BlockSize), &buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decompress(method, z, BlockSize-1); err == nil {
			t.Errorf("%s: a block larger than its place was accepted", method)
		}
		if got, err := decompress(method, z, BlockSize); err != nil || len(got) != BlockSize {
			t.Errorf("%s: %d bytes, %v", method, len(got), err)
		}
	}
}
