package replica

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// requireQemuImg skips a test that needs images made by qemu when
// qemu-img is missing.
func requireQemuImg(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"qemu-img", "qemu-io"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian package qemu-utils, which scripts/test.sh installs): skipping the qcow2 images made by qemu", tool)
		}
	}
}

func runQemu(t testing.TB, tool string, args ...string) {
	t.Helper()
	if out, err := exec.Command(tool, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
}

// qemuSourceSize is the raw disk the qemu tests convert: not a multiple
// of any cluster size, within testSize so a replica fits it.
const qemuSourceSize = 3<<20 + 7*512

// qemuSource writes a raw disk of random data with holes: whole zero
// regions (which qemu leaves unallocated), short zero runs inside data,
// and regions that compress.
func qemuSource(t testing.TB, n int) (string, []byte) {
	t.Helper()
	rng := rand.New(rand.NewSource(42))
	data := make([]byte, n)
	rng.Read(data)
	for off := 0; off < n; off += 64 << 10 {
		switch rng.Intn(4) {
		case 0: // a hole of 64 KiB
			clear(data[off:min(n, off+64<<10)])
		case 1: // a short run of zeros at an odd place
			start := off + rng.Intn(60<<10)
			clear(data[start:min(n, start+rng.Intn(4000)+1)])
		case 2: // data that compresses: a short pattern, repeated
			pattern := data[off : off+37]
			for i := off + 37; i < min(n, off+64<<10); i += 37 {
				copy(data[i:min(n, off+64<<10)], pattern)
			}
		}
	}
	clear(data[1<<20 : 1<<20+300<<10]) // a hole wider than any cluster but 2 MiB
	path := filepath.Join(t.TempDir(), "source.raw")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// qemuImage is one way of making a qcow2 image of the source.
type qemuImage struct {
	name     string
	options  string
	compress bool
	// zeroes are qemu-io "write -z" ranges (offset, length) applied after
	// the conversion.
	zeroes [][2]int
}

var qemuImages = []qemuImage{
	{name: "v2, 512 B clusters", options: "compat=0.10,cluster_size=512"},
	{name: "v2, 64 KiB clusters", options: "compat=0.10,cluster_size=65536"},
	{name: "v3, 4 KiB clusters", options: "compat=1.1,cluster_size=4096"},
	{name: "v3, 64 KiB clusters", options: "compat=1.1,cluster_size=65536"},
	{name: "v3, 2 MiB clusters", options: "compat=1.1,cluster_size=2097152"},
	{name: "v2, compressed, 4 KiB clusters", options: "compat=0.10,cluster_size=4096", compress: true},
	{name: "v3, compressed, 512 B clusters", options: "compat=1.1,cluster_size=512", compress: true},
	{name: "v3, compressed, 64 KiB clusters", options: "compat=1.1,cluster_size=65536", compress: true},
	{name: "v3, compressed, 2 MiB clusters", options: "compat=1.1,cluster_size=2097152", compress: true},
	{name: "v3, zeroed regions, 64 KiB clusters", options: "compat=1.1,cluster_size=65536",
		zeroes: [][2]int{{0, 64 << 10}, {192 << 10, 256 << 10}, {100000, 5000}, {2 << 20, 1 << 20}}},
	{name: "v3, zeroed regions, 4 KiB clusters", options: "compat=1.1,cluster_size=4096",
		zeroes: [][2]int{{8 << 10, 40 << 10}, {777 << 10, 9000}}},
}

// makeQemuImage converts the source with qemu-img and returns the qcow2
// file and the disk it must read as.
func makeQemuImage(t testing.TB, src string, data []byte, img qemuImage) (string, []byte) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "image.qcow2")
	args := []string{"convert", "-f", "raw", "-O", "qcow2", "-o", img.options}
	if img.compress {
		args = append(args, "-c")
	}
	runQemu(t, "qemu-img", append(args, src, dst)...)
	want := bytes.Clone(data)
	for _, z := range img.zeroes {
		runQemu(t, "qemu-io", "-f", "qcow2", "-c", fmt.Sprintf("write -z %d %d", z[0], z[1]), dst)
		clear(want[z[0] : z[0]+z[1]])
	}
	return dst, want
}

// l2Kinds counts the L2 entries of q's clusters: compressed, zero
// (bit 0), data, unallocated.
func l2Kinds(t *testing.T, q *qcow2Reader) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	perTable := q.h.l2Entries()
	for vc := int64(0); vc<<q.h.clusterBits < q.h.size; vc++ {
		tableOff := int64(q.l1[vc/perTable] & qcow2OffsetMask)
		if tableOff == 0 {
			kinds["unallocated"]++
			continue
		}
		table, err := q.l2Table(tableOff)
		if err != nil {
			t.Fatal(err)
		}
		e := binary.BigEndian.Uint64(table[vc%perTable*8:])
		switch {
		case e&qcow2Compressed != 0:
			kinds["compressed"]++
		case e&qcow2ZeroFlag != 0:
			kinds["zero"]++
		case e&qcow2OffsetMask != 0:
			kinds["data"]++
		default:
			kinds["unallocated"]++
		}
	}
	return kinds
}

// TestQcow2ReaderReadsQemuImages: images qemu-img makes of a raw disk
// read byte for byte as that disk, at odd offsets and lengths, and from
// many goroutines at once.
func TestQcow2ReaderReadsQemuImages(t *testing.T) {
	requireQemuImg(t)
	src, data := qemuSource(t, qemuSourceSize)
	for _, img := range qemuImages {
		t.Run(img.name, func(t *testing.T) {
			path, want := makeQemuImage(t, src, data, img)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r, err := openQcow2(f)
			if err != nil {
				f.Close()
				t.Fatal(err)
			}
			defer r.Close()
			q := r.(*qcow2Reader)
			kinds := l2Kinds(t, q)
			switch {
			case img.compress && kinds["compressed"] == 0:
				t.Fatalf("no compressed cluster in the image: %v", kinds)
			case len(img.zeroes) > 0 && kinds["zero"] == 0:
				t.Fatalf("no zero cluster in the image: %v", kinds)
			case q.h.clusterSize() < 2<<20 && kinds["unallocated"] == 0:
				t.Fatalf("no unallocated cluster in the image: %v", kinds)
			}
			t.Logf("clusters: %v", kinds)
			checkReads(t, r, want, q.h.clusterSize())
			readConcurrently(t, r, want)
		})
	}
}

// readConcurrently reads random ranges from 8 goroutines at once.
func readConcurrently(t *testing.T, r backingReader, want []byte) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			buf := make([]byte, 20<<10)
			for range 200 {
				n := rng.Intn(len(buf)) + 1
				off := rng.Int63n(int64(len(want) - n))
				if _, err := r.ReadAt(buf[:n], off); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf[:n], want[off:off+int64(n)]) {
					errs <- fmt.Errorf("goroutine %d: %d bytes at %d differ", g, n, off)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestReplicaOnQcow2BackingFile: a replica created on a qcow2 file reads
// its virtual disk, keeps writes in its layers, and never changes the file.
func TestReplicaOnQcow2BackingFile(t *testing.T) {
	requireQemuImg(t)
	src, data := qemuSource(t, qemuSourceSize)
	for _, img := range []qemuImage{qemuImages[7], qemuImages[9]} {
		t.Run(img.name, func(t *testing.T) {
			path, base := makeQemuImage(t, src, data, img)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b := BackingFile{Path: path, Name: "img", Checksum: strings.Repeat("b", 128)}
			r, dir := newReplicaOnBacking(t, b)
			want := make([]byte, testSize)
			copy(want, base)
			if got := image(t, r); !bytes.Equal(got, want) {
				t.Fatal("a new replica does not read its qcow2 backing file's disk")
			}
			write(t, r, 5000, []byte("hello"))
			copy(want[5000:], "hello")
			write(t, r, qemuSourceSize-2, []byte("edge"))
			copy(want[qemuSourceSize-2:], "edge")
			must(t, r.CreateSnapshot("s1", true, t0, nil))
			write(t, r, 1<<20, make([]byte, 8192))
			clear(want[1<<20 : 1<<20+8192])
			if got := image(t, r); !bytes.Equal(got, want) {
				t.Fatal("the volume does not read its layers over the qcow2 backing file")
			}
			must(t, r.Close())
			r, err = Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if got := image(t, r); !bytes.Equal(got, want) {
				t.Fatal("a reopened replica reads differently")
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
				t.Fatal("the qcow2 backing file was modified")
			}
			// The virtual size, not the file's, must fit in the volume.
			if _, err := CreateOnBacking(filepath.Join(t.TempDir(), "small"), 3<<20, b); err == nil ||
				!strings.Contains(err.Error(), fmt.Sprintf("smaller than its backing image img (%d bytes)", qemuSourceSize)) {
				t.Fatalf("a volume smaller than the virtual size: err = %v", err)
			}
		})
	}
}

// TestQcow2WithItsOwnBackingFileIsRefused: an overlay qemu-img creates
// on another image is refused at replica creation, naming that image.
func TestQcow2WithItsOwnBackingFileIsRefused(t *testing.T) {
	requireQemuImg(t)
	src, _ := qemuSource(t, qemuSourceSize)
	overlay := filepath.Join(t.TempDir(), "overlay.qcow2")
	runQemu(t, "qemu-img", "create", "-f", "qcow2", "-b", src, "-F", "raw", overlay)
	_, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), testSize, BackingFile{Path: overlay, Name: "img"})
	if err == nil || !strings.Contains(err.Error(), "backing file of its own") || !strings.Contains(err.Error(), src) {
		t.Fatalf("err = %v, want the overlay refused naming %s", err, src)
	}
	for _, opts := range []string{"data_file=" + filepath.Join(t.TempDir(), "data.raw"), "extended_l2=on"} {
		img := filepath.Join(t.TempDir(), "img.qcow2")
		runQemu(t, "qemu-img", "create", "-f", "qcow2", "-o", opts, img, "1M")
		if _, err := CreateOnBacking(filepath.Join(t.TempDir(), "r"), testSize, BackingFile{Path: img, Name: "img"}); err == nil ||
			!strings.Contains(err.Error(), "not supported") {
			t.Fatalf("%s: err = %v, want it refused", opts, err)
		}
	}
}
