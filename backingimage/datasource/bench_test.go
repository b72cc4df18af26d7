package datasource

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

const benchSize = 64 << 20

// benchSource serves benchSize random bytes over HTTP on 127.0.0.1.
func benchSource(b *testing.B) ([]byte, *httptest.Server) {
	data := randomBytes(b, benchSize)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image", time.Time{}, bytes.NewReader(data))
	}))
	b.Cleanup(src.Close)
	return data, src
}

// BenchmarkDownload is a whole download by the data source: HTTP, SHA512
// as it goes, the checksum check, fsync and rename.
func BenchmarkDownload(b *testing.B) {
	data, src := benchSource(b)
	disk := newDisk(b, "disk-1")
	sum := sha(data)
	b.SetBytes(benchSize)
	for b.Loop() {
		prepareOnce(b, Config{Name: "image", UUID: "u1", DiskPath: disk, DiskUUID: "disk-1", SourceType: "download",
			Parameters: download(src.URL), ExpectedChecksum: sum, Log: quietLog()})
	}
}

// BenchmarkPlainCopyOfTheDownload is the floor: io.Copy of the same HTTP
// body into a file, nothing else.
func BenchmarkPlainCopyOfTheDownload(b *testing.B) { plainDownload(b, false) }

// BenchmarkPlainCopyOfTheDownloadAndFsync adds the fsync that durability
// needs, so the difference to BenchmarkDownload is the checksum work.
func BenchmarkPlainCopyOfTheDownloadAndFsync(b *testing.B) { plainDownload(b, true) }

func plainDownload(b *testing.B, fsync bool) {
	_, src := benchSource(b)
	dst := filepath.Join(b.TempDir(), "copy")
	b.SetBytes(benchSize)
	for b.Loop() {
		resp, err := http.Get(src.URL)
		if err != nil {
			b.Fatal(err)
		}
		f, _ := os.Create(dst)
		if _, err := io.Copy(f, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if fsync {
			f.Sync()
		}
		f.Close()
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

// exportBench exports the snapshot of a volume of size bytes whose first
// benchSize bytes hold random data, raw, through a real engine service on
// 127.0.0.1: the gRPC reads, SHA512, the sparse file, fsync and rename.
func exportBench(b *testing.B, size int64) {
	addr, e := serveEngine(b, size)
	if _, err := e.WriteAt(randomBytes(b, benchSize), 0); err != nil {
		b.Fatal(err)
	}
	if _, err := e.CreateSnapshot("snap", nil); err != nil {
		b.Fatal(err)
	}
	disk := newDisk(b, "disk-1")
	b.SetBytes(size)
	for b.Loop() {
		prepareOnce(b, Config{Name: "image", UUID: "u1", DiskPath: disk, DiskUUID: "disk-1", SourceType: "export-from-volume",
			Parameters: exportParams("raw"), Exporter: EngineExporter{Address: addr, TLS: mtlstest.Identity(b)}, Log: quietLog()})
	}
}

// prepareOnce runs a data source server with cfg until its file is ready
// for transfer, then closes it.
func prepareOnce(b *testing.B, cfg Config) {
	s, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	for st := s.Status(); st.State != longhorn.BackingImageStateReadyForTransfer; st = s.Status() {
		if st.State == longhorn.BackingImageStateFailed {
			b.Fatal(st.Message)
		}
		time.Sleep(time.Millisecond)
	}
}

// BenchmarkExportThroughTheEngine: a volume full of data (compare with
// BenchmarkPlainFileCopy, the same bytes copied file to file).
func BenchmarkExportThroughTheEngine(b *testing.B) { exportBench(b, benchSize) }

// BenchmarkExportSparseThroughTheEngine: a 1 GiB volume that holds
// benchSize bytes; the engine sends only those, the rest is hashed as
// zeros and left as holes.
func BenchmarkExportSparseThroughTheEngine(b *testing.B) { exportBench(b, 1<<30) }
