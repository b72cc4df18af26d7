package backupstore

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// benchSize is the volume of the throughput benchmarks: 256 MiB for
// make bench, LONGHORN_BENCH_BACKUP_MIB=1024 for the 1 GiB.
func benchSize(b *testing.B) int64 {
	if v := os.Getenv("LONGHORN_BENCH_BACKUP_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("LONGHORN_BENCH_BACKUP_MIB=%q", v)
		}
		return int64(n) << 20
	}
	return 256 << 20
}

// halfRandomVolume is a replica of size bytes whose snapshot s1 holds, in
// every 2 MiB block, half random and half compressible data.
func halfRandomVolume(b *testing.B, size int64) (*replica.Replica, *replica.SnapshotView) {
	r, err := replica.Create(filepath.Join(b.TempDir(), "replica"), size)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Close() })
	for off := int64(0); off < size; off += BlockSize {
		if _, err := r.WriteAt(halfRandom(off, BlockSize), off); err != nil {
			b.Fatal(err)
		}
	}
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		b.Fatal(err)
	}
	return r, snapshotView(b, r, "s1")
}

// readAndCompress is the baseline of a full backup: read the snapshot
// block by block and compress each on workers goroutines, nothing else;
// with hash, also take each block's SHA-256, as the format needs (it
// names the block in the target).
func readAndCompress(b *testing.B, v *replica.SnapshotView, method string, workers int, hash bool) {
	blocks := make(chan []byte, workers)
	free := make(chan []byte, workers+1)
	for i := 0; i < workers+1; i++ {
		free <- make([]byte, BlockSize)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var z bytes.Buffer
			for data := range blocks {
				if hash {
					sha256.Sum256(data)
				}
				if _, err := compress(method, data, &z); err != nil {
					b.Error(err)
				}
				free <- data
			}
		}()
	}
	for off := int64(0); off < v.Size(); off += BlockSize {
		data := <-free
		if _, err := v.ReadAt(data, off); err != nil {
			b.Fatal(err)
		}
		blocks <- data
	}
	close(blocks)
	wg.Wait()
}

// BenchmarkFullBackupAgainstBaseline backs a snapshot of half random,
// half compressible data up to a new path of a file:// target and of the
// local S3 server, interleaved with the baseline (reading and compressing
// it alone, same method, on as many workers as cores), and reports both
// speeds and their ratio.
func BenchmarkFullBackupAgainstBaseline(b *testing.B) {
	size := benchSize(b)
	_, v := halfRandomVolume(b, size)
	targets := testTargets(b)
	for _, kind := range []string{"file", "s3"} {
		tt := targets[kind]
		for _, method := range []string{CompressionLZ4, CompressionGzip} {
			var serverCPU func() time.Duration
			if tt.S3 != nil {
				serverCPU = tt.S3.CPUTime
			}
			b.Run(kind+"/"+method, func(b *testing.B) {
				benchFullBackup(b, v, method, serverCPU, func(i int) *Store {
					// A fresh path each time: a full backup, nothing to dedupe.
					target := tt.Target + "bench-" + method + "-" + fmt.Sprint(i) + "/"
					if kind == "file" {
						target = tt.Target + "/bench-" + method + "-" + fmt.Sprint(i)
					}
					s, err := OpenWithCredential(target, tt.Credential)
					if err != nil {
						b.Fatal(err)
					}
					return s
				})
			})
		}
	}
}

// benchFullBackup measures a full backup to the store newStore gives and
// the baseline, interleaved, and reports MB/s of both and the ratio; and
// ratio-with-sha256, against the baseline that also takes each block's
// SHA-256 (the least work a backup in this format does). It also reports the processor time each took (this process's, and the S3
// server's when serverCPU is set) per GB, and their ratio: on a machine
// shared with other work, where the wall-clock ratio moves with the
// load, the ratio of processor time says what the backup costs against
// the baseline.
func benchFullBackup(b *testing.B, v *replica.SnapshotView, method string, serverCPU func() time.Duration, newStore func(i int) *Store) {
	workers := DefaultConcurrency
	if w, err := strconv.Atoi(os.Getenv("LONGHORN_BENCH_BACKUP_WORKERS")); err == nil {
		workers = w
	}
	server := func() time.Duration {
		if serverCPU == nil {
			return 0
		}
		return serverCPU()
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) + server()
	}
	var base, baseSHA, backup, baseCPU, backupCPU, backupServerCPU time.Duration
	for i := 0; i < b.N; i++ {
		start, startCPU := time.Now(), cpu()
		readAndCompress(b, v, method, DefaultConcurrency, false)
		base += time.Since(start)
		baseCPU += cpu() - startCPU
		start = time.Now()
		readAndCompress(b, v, method, DefaultConcurrency, true)
		baseSHA += time.Since(start)
		s := newStore(i)
		start, startCPU, startServer := time.Now(), cpu(), server()
		if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v, Compression: method, Concurrency: workers}); err != nil {
			b.Fatal(err)
		}
		backup += time.Since(start)
		backupCPU += cpu() - startCPU
		backupServerCPU += server() - startServer
	}
	mb := float64(v.Size()) * float64(b.N) / 1e6
	b.ReportMetric(mb/base.Seconds(), "MB/s-baseline")
	b.ReportMetric(mb/backup.Seconds(), "MB/s-backup")
	b.ReportMetric(base.Seconds()/backup.Seconds(), "ratio")
	b.ReportMetric(baseSHA.Seconds()/backup.Seconds(), "ratio-with-sha256")
	b.ReportMetric(baseCPU.Seconds()/(mb/1e3), "cpu-s/GB-baseline")
	b.ReportMetric(backupCPU.Seconds()/(mb/1e3), "cpu-s/GB-backup")
	b.ReportMetric(baseCPU.Seconds()/backupCPU.Seconds(), "cpu-ratio")
	if serverCPU != nil {
		b.ReportMetric(backupServerCPU.Seconds()/(mb/1e3), "cpu-s/GB-backup-server")
	}
}

// BenchmarkBlockWork is the work on one 2 MiB block (half random, half
// text) that a backup cannot avoid, on one core: its SHA-256 (its name in
// the target) and its compression, in MB/s of block.
func BenchmarkBlockWork(b *testing.B) {
	data := halfRandom(1, BlockSize)
	b.Run("sha256", func(b *testing.B) {
		b.SetBytes(BlockSize)
		for i := 0; i < b.N; i++ {
			sha256.Sum256(data)
		}
	})
	for _, method := range []string{CompressionLZ4, CompressionGzip} {
		b.Run(method, func(b *testing.B) {
			var z bytes.Buffer
			b.SetBytes(BlockSize)
			for i := 0; i < b.N; i++ {
				if _, err := compress(method, data, &z); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkIncrementalBackupScattered rewrites 1% of the volume in
// scattered 4 KiB writes between backups and reports the bytes uploaded
// against the 2 MiB blocks those writes touched.
func BenchmarkIncrementalBackupScattered(b *testing.B) {
	size := benchSize(b)
	r, v := halfRandomVolume(b, size)
	s, err := Open("file://" + b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v.ID(), Source: v}); err != nil {
		b.Fatal(err)
	}
	prev, prevID := "s1", v.ID()
	rng := rand.New(rand.NewSource(1))
	var uploaded, touchedBytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		touched := map[int64]bool{}
		for n := int64(0); n < size/100; n += 4096 {
			off := rng.Int63n(size/4096) * 4096
			if _, err := r.WriteAt(halfRandom(rng.Int63(), 4096), off); err != nil {
				b.Fatal(err)
			}
			touched[off/BlockSize] = true
		}
		name := fmt.Sprintf("i%d", i)
		if err := r.CreateSnapshot(name, true, time.Now(), nil); err != nil {
			b.Fatal(err)
		}
		view, err := r.OpenSnapshot(name)
		if err != nil {
			b.Fatal(err)
		}
		changed, _, err := r.ChangedBlocksByID(prevID, view.ID())
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		_, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: name, SnapshotID: view.ID(), Source: view, Changed: changed, ChangedSince: prev, ChangedSinceID: prevID})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		prev, prevID = name, view.ID()
		view.Close()
		uploaded += st.BytesUploaded
		touchedBytes += int64(len(touched)) * BlockSize
	}
	b.ReportMetric(float64(uploaded)/float64(touchedBytes), "uploaded/touched")
	b.ReportMetric(float64(touchedBytes)/float64(b.N)/float64(size), "touched/volume")
}

// countingDriver counts the calls made to a driver.
type countingDriver struct {
	Driver
	calls atomic.Int64
}

func (d *countingDriver) Read(key string, limit int64) ([]byte, error) {
	d.calls.Add(1)
	return d.Driver.Read(key, limit)
}

func (d *countingDriver) List(prefix string) ([]string, error) {
	d.calls.Add(1)
	return d.Driver.List(prefix)
}

func (d *countingDriver) Exists(key string) (bool, error) {
	d.calls.Add(1)
	return d.Driver.Exists(key)
}

// fillTarget writes volumes x backups configs (and volume records) the way
// backups leave them, without data.
func fillTarget(b *testing.B, d Driver, volumes, backups int) {
	sum := fmt.Sprintf("%064x", 1)
	for v := 0; v < volumes; v++ {
		vol := fmt.Sprintf("vol-%03d", v)
		for i := 0; i < backups; i++ {
			info := BackupInfo{Name: fmt.Sprintf("backup-%03d", i), VolumeName: vol, VolumeSize: 1 << 30, SnapshotName: "s", Compression: CompressionLZ4,
				CreatedAt: time.Unix(int64(i), 0).UTC().Format(time.RFC3339), Blocks: []BlockRef{{Offset: 0, Checksum: sum}}}
			if err := writeJSONTo(d, backupCfgKey(vol, info.Name), info); err != nil {
				b.Fatal(err)
			}
		}
		if err := writeJSONTo(d, volumeCfgKey(vol), VolumeInfo{Name: vol, Size: 1 << 30, LastBackupName: fmt.Sprintf("backup-%03d", backups-1)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanTarget reads a target of 100 volumes x 30 backups, as the
// backup target controller does on each poll, and reports the requests.
func BenchmarkScanTarget(b *testing.B) {
	for kind, tt := range testTargets(b) {
		b.Run(kind, func(b *testing.B) {
			fillTarget(b, tt.Driver, 100, 30)
			d := &countingDriver{Driver: tt.Driver}
			s := NewStore(tt.Target, d)
			scan := func() {
				l, err := s.Scan()
				if err != nil || len(l.Volumes) != 100 || len(l.Backups["vol-099"]) != 30 {
					b.Fatalf("scan: %v", err)
				}
			}
			// The first poll of a target reads every config; later ones
			// only what changed.
			summaries.keepVolumes(tt.Target, nil)
			start := time.Now()
			scan()
			firstTook, firstCalls := time.Since(start), d.calls.Swap(0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				scan()
			}
			b.ReportMetric(float64(d.calls.Load())/float64(b.N), "requests/scan")
			b.ReportMetric(float64(firstTook.Milliseconds()), "ms/first-scan")
			b.ReportMetric(float64(firstCalls), "requests/first-scan")
		})
	}
}
