package backupstore

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"
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

// TestLZ4BlocksCarryNoContentChecksum: a block's name is the SHA-256 of
// its data, checked on every restore, so the lz4 frame's own xxh32 of the
// content is work a backup and a restore do for nothing. New blocks leave
// it out (the frame descriptor's content checksum flag, bit 2 of the byte
// after the magic, is clear); blocks written with it, by earlier versions,
// still decompress, and a frame whose xxh32 does not match is refused.
func TestLZ4BlocksCarryNoContentChecksum(t *testing.T) {
	data := halfRandom(7, BlockSize)
	var z bytes.Buffer
	stored, err := compress(CompressionLZ4, data, &z)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) < 5 || stored[4]&0x04 != 0 {
		t.Fatalf("new lz4 block has the content checksum flag set: descriptor %08b", stored[4])
	}
	got, err := decompress(CompressionLZ4, stored, BlockSize)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("new lz4 block does not decompress: %v", err)
	}

	var old bytes.Buffer
	w := lz4.NewWriter(&old) // as blocks were written before: content checksum on
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if old.Bytes()[4]&0x04 == 0 {
		t.Fatal("the lz4 library's default no longer sets the content checksum: this test no longer writes an old block")
	}
	got, err = decompress(CompressionLZ4, old.Bytes(), BlockSize)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("an lz4 block with a content checksum does not decompress: %v", err)
	}
	bad := bytes.Clone(old.Bytes())
	bad[len(bad)-1] ^= 0xff // the content checksum is the frame's last 4 bytes
	if _, err := decompress(CompressionLZ4, bad, BlockSize); err == nil {
		t.Fatal("an lz4 block whose content checksum does not match decompressed")
	}
}
