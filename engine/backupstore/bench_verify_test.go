package backupstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// BenchmarkVerifyAgainstRestore backs a snapshot of half random, half
// compressible data up to a file:// target and to the local S3 server,
// then, interleaved in one run, drills the backup (Verify, reading every
// block once on backup-concurrent-limit workers, a fresh Verifier each
// time) and restores it into a new replica, and reports both speeds and
// their ratio (verify over restore: above 1, the drill is the faster).
// LONGHORN_BENCH_BACKUP_MIB=1024 gives the 1 GiB.
func BenchmarkVerifyAgainstRestore(b *testing.B) {
	size := benchSize(b)
	_, v := halfRandomVolume(b, size)
	for kind, tt := range testTargets(b) {
		b.Run(kind, func(b *testing.B) {
			s := NewStore(tt.Target, tt.Driver)
			info, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v})
			if err != nil {
				b.Fatal(err)
			}
			var verify, restore time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				res, err := s.NewVerifier(DefaultConcurrency).Verify(context.Background(), "vol", info.Name)
				if err != nil || !res.OK() || res.BlocksRead != len(info.Blocks) {
					b.Fatalf("verify: %+v, %v", res, err)
				}
				verify += time.Since(start)
				dst, err := replica.Create(filepath.Join(b.TempDir(), "restore"), size)
				if err != nil {
					b.Fatal(err)
				}
				start = time.Now()
				if _, err := s.Restore("vol", info.Name, dst, nil); err != nil {
					b.Fatal(err)
				}
				restore += time.Since(start)
				dst.Close()
			}
			b.Logf("%s (%s): verify %v, restore %v for %d runs", kind, tt.Target, verify, restore, b.N)
			mb := float64(size) * float64(b.N) / 1e6
			b.ReportMetric(mb/verify.Seconds(), "MB/s-verify")
			b.ReportMetric(mb/restore.Seconds(), "MB/s-restore")
			b.ReportMetric(restore.Seconds()/verify.Seconds(), "ratio")
		})
	}
}
