package nbd

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A client's discard (NBD_CMD_TRIM) reaches the replica, which gives the
// space back: what was written there reads as zeros again (no snapshot
// holds it) and the rest is kept. nbdinfo sees trim advertised.
func TestADiscardGivesTheSpaceBack(t *testing.T) {
	r, uri := serve(t)
	if info := run(t, "nbdinfo", uri); !strings.Contains(info, "can_trim: true") {
		t.Errorf("nbdinfo does not see trim advertised:\n%s", info)
	}
	out := run(t, "qemu-io", "-f", "raw", uri,
		"-c", "write -P 0xab 0 4M",
		"-c", "flush",
		"-c", "discard 1M 2M",
		"-c", "flush",
		"-c", "read -P 0xab 0 1M",
		"-c", "read -P 0 1M 2M",
		"-c", "read -P 0xab 3M 1M")
	if strings.Contains(out, "fail") || strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("qemu-io:\n%s", out)
	}
	got := make([]byte, 2<<20)
	if _, err := r.ReadAt(got, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, make([]byte, 2<<20)) {
		t.Error("the discarded range of the replica does not read zeros")
	}
	written, err := r.Written()
	if err != nil {
		t.Fatal(err)
	}
	for b, w := range written[:4<<20/4096] {
		if want := b < 1<<20/4096 || b >= 3<<20/4096; w != want {
			t.Fatalf("block %d holds data: %v, want %v", b, w, want)
		}
	}
}

// Zeroes carry no payload, so a client may ask for more of them at once
// than a write's limit: nbdcopy of a sparse file zeroes its 60 MiB hole in
// one request, over data written before, and the export then reads as
// the file (it answered EINVAL before).
func TestWriteZeroesLongerThanAWrite(t *testing.T) {
	const n = 64 << 20
	_, addr := serveSized(t, n, func(*Server) {})
	uri := "nbd://" + addr + "/vol"
	run(t, "qemu-io", "-f", "raw", uri, "-c", "write -P 0xcd 0 64M", "-c", "flush")
	img := filepath.Join(t.TempDir(), "sparse.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte{0x5a}, 4<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(n); err != nil {
		t.Fatal(err)
	}
	f.Close()
	run(t, "nbdcopy", img, uri)
	out := run(t, "qemu-io", "-f", "raw", uri, "-c", "read -P 0x5a 0 4M", "-c", "read -P 0 4M 60M")
	if strings.Contains(out, "fail") || strings.Contains(out, "Pattern verification failed") {
		t.Fatalf("the export after nbdcopy of a sparse file:\n%s", out)
	}
}
