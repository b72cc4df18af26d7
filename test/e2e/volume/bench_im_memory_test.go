//go:build e2e

package volume

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkInstanceManagerMemoryAtPeak measures the instance manager's
// memory at the peak its pod's limit (1 GiB, package/) is sized for: 100
// attached volumes of 30 snapshots each, then every volume's client
// writing 32 MiB requests (NBD's largest here) at once. It reports the
// instance manager's resident set idle (no engine), with the engines
// started and snapshotted, and its peak (VmHWM) once the writes are
// done: the large requests share one budget (engine/nbd), so the peak
// does not grow with the number of clients. LONGHORN_BENCH_IM_VOLUMES
// sets the number of volumes.
func BenchmarkInstanceManagerMemoryAtPeak(b *testing.B) {
	volumes := 100
	if v, err := strconv.Atoi(os.Getenv("LONGHORN_BENCH_IM_VOLUMES")); err == nil && v > 0 {
		volumes = v
	}
	const snapshots, request, rounds = 30, 32 << 20, 2
	dir := b.TempDir()
	im := framework.RunInstanceManager(b, filepath.Join(dir, "im"))
	pid := instanceManagerPIDIn(b, filepath.Join(dir, "im"))
	idle := framework.ProcStatus(b, pid, "VmRSS")
	for i := 0; i < b.N; i++ {
		endpoints := make([]string, volumes)
		for v := range volumes {
			name := fmt.Sprintf("vol-%03d", v)
			run, err := im.Start(name, 2*request, []instance.ReplicaDir{{Name: "r", Dir: filepath.Join(dir, name, "r"), New: true}}, true)
			if err != nil {
				b.Fatal(err)
			}
			for s := range snapshots {
				if _, err := run.Engine.CreateSnapshot(fmt.Sprintf("snap-%02d", s), nil); err != nil {
					b.Fatal(err)
				}
			}
			endpoints[v] = run.Endpoint
		}
		attached := framework.ProcStatus(b, pid, "VmRSS")
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, volumes)
		data := make([]byte, request)
		for v := range volumes {
			wg.Go(func() {
				c, err := framework.DialNBD(endpoints[v], time.Minute)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				for r := range rounds {
					if err := c.WriteAt(data, int64(r%2)*request); err != nil {
						errs <- fmt.Errorf("volume %d: %w", v, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		took := time.Since(start)
		peak := framework.ProcStatus(b, pid, "VmHWM")
		b.ReportMetric(idle/1024, "MiB-idle")
		b.ReportMetric(attached/1024, "MiB-attached")
		b.ReportMetric(peak/1024, "MiB-peak")
		b.ReportMetric(float64(volumes*rounds*request)/(1<<20)/took.Seconds(), "MB/s-written")
		for v := range volumes {
			if err := im.Stop(fmt.Sprintf("vol-%03d", v)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// instanceManagerPIDIn is the pid an instance manager on dir wrote.
func instanceManagerPIDIn(tb testing.TB, dir string) int {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "instance-manager.pid"))
	if err != nil {
		tb.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		tb.Fatal(err)
	}
	return pid
}
