package replica

import (
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkBackingRead reads 4 KiB blocks, in order and at random, from a
// 64 MiB disk held as a raw file and as qcow2 images made by qemu-img
// (64 KiB clusters; plain and compressed). MB/s compares them; the files
// are in the page cache, so this is the reader's own cost.
func BenchmarkBackingRead(b *testing.B) {
	requireQemuImg(b)
	const size = 64 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewSource(1))
	rng.Read(data)
	// A quarter holes, a quarter compressible, as a real image might be.
	for off := 0; off < size; off += 1 << 20 {
		switch off >> 20 % 4 {
		case 1:
			clear(data[off : off+1<<20])
		case 2:
			for i := off + 64; i < off+1<<20; i += 64 {
				copy(data[i:i+64], data[off:off+64])
			}
		}
	}
	raw := filepath.Join(b.TempDir(), "disk.raw")
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		b.Fatal(err)
	}
	files := []struct{ name, path string }{{"raw", raw}}
	for _, img := range []struct {
		name     string
		compress bool
	}{{"qcow2", false}, {"qcow2-compressed", true}} {
		dst := filepath.Join(b.TempDir(), img.name)
		args := []string{"convert", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=65536"}
		if img.compress {
			args = append(args, "-c")
		}
		runQemu(b, "qemu-img", append(args, raw, dst)...)
		files = append(files, struct{ name, path string }{img.name, dst})
	}
	for _, f := range files {
		r, err := openBacking(&BackingFile{Path: f.path})
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 4096)
		b.Run(f.name+"/sequential-4KiB", func(b *testing.B) {
			b.SetBytes(4096)
			off := int64(0)
			for b.Loop() {
				if _, err := r.ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
				off = (off + 4096) % size
			}
		})
		b.Run(f.name+"/random-4KiB", func(b *testing.B) {
			b.SetBytes(4096)
			rng := rand.New(rand.NewSource(2))
			for b.Loop() {
				if _, err := r.ReadAt(buf, rng.Int63n(size/4096)*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
		r.Close()
	}
}
