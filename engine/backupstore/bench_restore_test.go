package backupstore

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// BenchmarkRestoreAgainstBaselines backs a snapshot of half random, half
// compressible data up to a file:// target (lz4, a full backup), then, in
// one run and interleaved, times:
//
//   - the restore of it into a new replica, as the engine restores
//     (Store.Restore with the replica as its io.WriterAt; the engine's
//     fsync after it is not counted), the replica removed after each
//     round;
//   - the baseline: reading every block of the backup from the target and
//     decompressing it alone, on as many workers as the restore;
//   - restic, when the restic binary is on PATH: `restic restore latest`
//     of the same bytes, backed up once as one file into a local
//     repository, into a new directory each round.
//
// It also times the restore on one worker (MB/s-restore-1-worker: block
// after block, as restores were before issue 39), the restore into a
// destination that drops what it is given (MB/s-restore-no-writes: the
// restore's own work, without the replica's writes), and the baseline
// with each block's SHA-256 taken (ratio-with-sha256: the restore's speed
// over it). It reports each speed and the ratios restore/baseline (the
// goal: at least 0.5) and restore/restic (the goal: at least 1), as
// speeds: above 1, the restore is the faster.
// LONGHORN_BENCH_BACKUP_MIB=1024 gives the 1 GiB;
// LONGHORN_BENCH_BACKUP_WORKERS the workers (2, backup-concurrent-limit's
// default, when unset).
func BenchmarkRestoreAgainstBaselines(b *testing.B) {
	size := benchSize(b)
	workers := DefaultConcurrency
	if w, err := strconv.Atoi(os.Getenv("LONGHORN_BENCH_BACKUP_WORKERS")); err == nil && w > 0 {
		workers = w
	}
	_, v := halfRandomVolume(b, size)
	root := b.TempDir()
	s, err := Open("file://" + root)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetBackupDefaults(CompressionLZ4, workers); err != nil {
		b.Fatal(err)
	}
	info, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v})
	if err != nil {
		b.Fatal(err)
	}
	one, err := Open("file://" + root)
	if err != nil {
		b.Fatal(err)
	}
	if err := one.SetBackupDefaults(CompressionLZ4, 1); err != nil {
		b.Fatal(err)
	}
	restic := newResticBench(b, v)

	var restore, restoreOne, discard, base, baseSHA, res time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		restore += restoreIntoReplica(b, s, info)
		// The same on one worker: block after block, as restores were.
		restoreOne += restoreIntoReplica(b, one, info)

		start := time.Now()
		if _, err := s.Restore("vol", info.Name, discardWriterAt{}, nil); err != nil {
			b.Fatal(err)
		}
		discard += time.Since(start)

		start = time.Now()
		readAndDecompress(b, s, info, workers, false)
		base += time.Since(start)

		start = time.Now()
		readAndDecompress(b, s, info, workers, true)
		baseSHA += time.Since(start)

		if restic != nil {
			res += restic.restore(b)
		}
	}
	b.StopTimer()
	mb := float64(size) * float64(b.N) / 1e6
	b.ReportMetric(mb/restore.Seconds(), "MB/s-restore")
	b.ReportMetric(mb/restoreOne.Seconds(), "MB/s-restore-1-worker")
	b.ReportMetric(mb/discard.Seconds(), "MB/s-restore-no-writes")
	b.ReportMetric(mb/base.Seconds(), "MB/s-baseline")
	b.ReportMetric(base.Seconds()/restore.Seconds(), "ratio-baseline")
	b.ReportMetric(baseSHA.Seconds()/restore.Seconds(), "ratio-with-sha256")
	b.Logf("%d MiB, %d workers, %d rounds: restore %v, on 1 worker %v, writing nothing %v, read and decompress %v, and hash %v", size>>20, workers, b.N, restore, restoreOne, discard, base, baseSHA)
	if restic == nil {
		b.Log("restic is not on PATH: restic's restore not measured")
		return
	}
	b.ReportMetric(mb/res.Seconds(), "MB/s-restic")
	b.ReportMetric(res.Seconds()/restore.Seconds(), "ratio-restic")
	b.Logf("%s: restore %v", restic.version, res)
}

// restoreIntoReplica times a restore of the backup into a new replica,
// removed after it, as restic's output is: no round pays for another's
// dirty pages.
func restoreIntoReplica(b *testing.B, s *Store, info *BackupInfo) time.Duration {
	dir := b.TempDir()
	dst, err := replica.Create(filepath.Join(dir, "restore"), info.VolumeSize)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := s.Restore(info.VolumeName, info.Name, dst, nil); err != nil {
		b.Fatal(err)
	}
	d := time.Since(start)
	dst.Close()
	if err := os.RemoveAll(dir); err != nil {
		b.Fatal(err)
	}
	return d
}

// discardWriterAt takes every write and keeps nothing.
type discardWriterAt struct{}

func (discardWriterAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// readAndDecompress is the restore's baseline: read every block of the
// backup from the target and decompress it, on workers goroutines,
// nothing else; with hash, also take each block's SHA-256 (what a drill
// does, and the least a restore must).
func readAndDecompress(b *testing.B, s *Store, info *BackupInfo, workers int, hash bool) {
	work := make(chan BlockRef)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d blockDecoder // reused, as the restore's workers do
			for ref := range work {
				z, err := s.driver.Read(blockKey(info.VolumeName, ref.Checksum, info.Compression), maxBlockFileSize)
				if err != nil {
					b.Error(err)
					continue
				}
				data, err := d.decode(info.Compression, z, min(int64(BlockSize), info.VolumeSize-ref.Offset))
				if err != nil {
					b.Error(err)
				}
				if hash {
					sha256.Sum256(data)
				}
			}
		}()
	}
	for _, ref := range info.Blocks {
		work <- ref
	}
	close(work)
	wg.Wait()
}

// resticBench is a local restic repository holding the benchmark's bytes
// as one file.
type resticBench struct {
	bin, dir, version string
	env               []string
}

// newResticBench backs the snapshot up with restic into a new local
// repository; nil when restic is not on PATH.
func newResticBench(b *testing.B, v *replica.SnapshotView) *resticBench {
	bin, err := exec.LookPath("restic")
	if err != nil {
		return nil
	}
	dir := b.TempDir()
	r := &resticBench{bin: bin, dir: dir, env: append(os.Environ(),
		"RESTIC_REPOSITORY="+filepath.Join(dir, "repo"), "RESTIC_PASSWORD=bench",
		"RESTIC_CACHE_DIR="+filepath.Join(dir, "cache"))}
	out, err := r.run("version")
	if err != nil {
		b.Fatalf("restic version: %v: %s", err, out)
	}
	r.version = string(out[:len(out)-1])
	if out, err := r.run("init"); err != nil {
		b.Fatalf("restic init: %v: %s", err, out)
	}
	data := filepath.Join(dir, "data", "volume.img")
	if err := os.MkdirAll(filepath.Dir(data), 0o755); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(data)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, BlockSize)
	for off := int64(0); off < v.Size(); off += BlockSize {
		n, err := v.ReadAt(buf[:min(int64(BlockSize), v.Size()-off)], off)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if out, err := r.run("backup", "--quiet", data); err != nil {
		b.Fatalf("restic backup: %v: %s", err, out)
	}
	os.Remove(data)
	return r
}

// run runs restic; its output is cut to its last 2 KiB (a failing restore
// says the same for every chunk).
func (r *resticBench) run(args ...string) ([]byte, error) {
	cmd := exec.Command(r.bin, args...)
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	if len(out) > 2048 {
		out = out[len(out)-2048:]
	}
	return out, err
}

// restore times one restic restore into a new directory, dropped after.
func (r *resticBench) restore(b *testing.B) time.Duration {
	target := filepath.Join(r.dir, "restored")
	start := time.Now()
	if out, err := r.run("restore", "latest", "--quiet", "--target", target); err != nil {
		b.Fatalf("restic restore: %v: %s", err, out)
	}
	d := time.Since(start)
	if err := os.RemoveAll(target); err != nil {
		b.Fatal(err)
	}
	return d
}
