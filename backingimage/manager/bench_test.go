package manager

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

const benchSize = 64 << 20

// BenchmarkSync is a whole sync between two managers on 127.0.0.1: the
// gRPC stream, SHA512 as it goes, the checksum check, fsync and rename.
func BenchmarkSync(b *testing.B) {
	data := randomBytes(b, benchSize)
	a := startManager(b, "", "disk-a", nil)
	ds := startUpload(b, a.disk, "disk-a", "image", "u1", data)
	ctx := context.Background()
	a.client.Fetch(ctx, "image", "u1", "", ds, 0)
	if info := waitFile(b, a.client, "image"); info.State != longhorn.BackingImageStateReady {
		b.Fatal(info.Message)
	}
	r := startManager(b, "", "disk-b", nil)
	sum := sha(data)
	b.SetBytes(benchSize)
	for b.Loop() {
		if _, err := r.client.Sync(ctx, "image", "u1", sum, a.address, benchSize); err != nil {
			b.Fatal(err)
		}
		if info := waitFile(b, r.client, "image"); info.State != longhorn.BackingImageStateReady {
			b.Fatal(info.Message)
		}
		if err := r.client.Delete(ctx, "image", "u1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainFileCopy is io.Copy of the same bytes from one file to another.
func BenchmarkPlainFileCopy(b *testing.B) {
	data := randomBytes(b, benchSize)
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	os.WriteFile(src, data, 0o644)
	b.SetBytes(benchSize)
	for b.Loop() {
		in, _ := os.Open(src)
		out, _ := os.Create(filepath.Join(dir, "dst"))
		if _, err := io.Copy(out, in); err != nil {
			b.Fatal(err)
		}
		in.Close()
		out.Close()
	}
}
