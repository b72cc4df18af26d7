//go:build e2e

package backup

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkBackupListedAfterCompletion is issue 49's item 8 through the
// daemon: how long after its engine ends a backup the API's backupList
// shows it Completed, against the engine's own time for the backup (from
// snapshotBackup's answer to the end of its last request to the target),
// the baseline measured in the same run. An S3 target (versitygw, on
// 127.0.0.1), backupstore-poll-interval 300 s: no poll lists a backup.
// The volume is LONGHORN_BENCH_BACKUP_MIB (default 1024) MiB of blocks
// half random, half text, as engine/backupstore's benchmarks write; its
// first backup, full, is reported apart (full-*), then each op rewrites
// 64 MiB and backs it up (incremental, incr-*). The goal: listed within
// 0.5 s of the engine's end.
func BenchmarkBackupListedAfterCompletion(b *testing.B) {
	mib := 1024
	if v := os.Getenv("LONGHORN_BENCH_BACKUP_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64 {
			b.Fatalf("LONGHORN_BENCH_BACKUP_MIB=%q: want a number of MiB, at least 64", v)
		}
		mib = n
	}
	env := newListedEnv(b)
	endpoint := env.attach(b, "bench", fmt.Sprintf("%dMi", mib))
	nbd, err := framework.DialNBD(endpoint, 30*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	defer nbd.Close()
	rng := rand.New(rand.NewSource(49))
	write := func(off, length int64) {
		const block = 2 << 20
		buf := make([]byte, block)
		text := bytes.Repeat([]byte("a backup is listed when it completes, not at the next scan. "), block/2/60+1)
		for at := off; at < off+length; at += block {
			rng.Read(buf[:block/2])
			copy(buf[block/2:], text)
			if err := nbd.WriteAt(buf, at); err != nil {
				b.Fatal(err)
			}
		}
		if err := nbd.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	write(0, int64(mib)<<20)
	full := env.backup(b, "bench", "full")

	var engine, listed, worst time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		write(int64(i%(mib/64))*64<<20, 64<<20)
		b.StartTimer()
		t := env.backup(b, "bench", fmt.Sprintf("incr-%d", i))
		engine += t.engine()
		listed += t.listedAfter()
		worst = max(worst, t.listedAfter())
	}
	b.StopTimer()
	// Reported after the loop: ResetTimer drops the metrics reported
	// before it.
	b.ReportMetric(ms(full.engine()), "full-engine-ms")
	b.ReportMetric(ms(full.listedAfter()), "full-listed-after-ms")
	b.ReportMetric(full.listedAfter().Seconds()/full.engine().Seconds(), "full-listed/engine")
	n := time.Duration(b.N)
	b.ReportMetric(ms(engine/n), "incr-engine-ms")
	b.ReportMetric(ms(listed/n), "incr-listed-after-ms")
	b.ReportMetric(ms(worst), "incr-listed-after-max-ms")
	b.ReportMetric(listed.Seconds()/engine.Seconds(), "incr-listed/engine")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
