//go:build e2e

package volume

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// BenchmarkNBDInstanceManager measures the I/O path through NBD with the
// engine in an instance manager process against the same engine in this
// process (the in-process runner of before), in one run: 4 KiB random
// writes, 1 MiB sequential writes and 1 MiB sequential reads, one request
// at a time. ratio-* is the instance manager's time over the in-process
// one (1.10 is 10% slower); each is the best of four rounds, the sides taking turns to go first.
// The client is a process of its own either way (the test binary as
// framework.EnvNBDBenchClient), as the kernel's NBD client is for a
// volume: only where the engine runs differs.
func BenchmarkNBDInstanceManager(b *testing.B) {
	log := logrus.NewEntry(logrus.StandardLogger())
	logrus.SetLevel(logrus.WarnLevel)
	defer logrus.SetLevel(logrus.InfoLevel)

	local := instance.NewEngines(rpc.NewServer(), "127.0.0.1", clock.RealClock{}, log, func(string) {}, nil)
	defer local.StopAll()
	in, err := local.Start("local", framework.NBDWorkloadVolumeSize, []instance.ReplicaDir{{Name: "r", Dir: filepath.Join(b.TempDir(), "r"), New: true}}, true)
	if err != nil {
		b.Fatal(err)
	}
	remote := framework.RunInstanceManager(b, b.TempDir())
	out, err := remote.Start("remote", framework.NBDWorkloadVolumeSize, []instance.ReplicaDir{{Name: "r", Dir: filepath.Join(b.TempDir(), "r"), New: true}}, true)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		for _, w := range framework.NBDWorkloads {
			var best [2]time.Duration
			var bytes int64
			for round := range 4 {
				// Each side goes first in turn: neither always meets the
				// page cache or the CPUs as the other left them.
				for k := range 2 {
					side := (k + round) % 2
					endpoint := []string{in.Endpoint, out.Endpoint}[side]
					took, n := framework.RunNBDWorkload(b, w, endpoint)
					if best[side] == 0 || took < best[side] {
						best[side] = took
					}
					bytes = n
				}
			}
			mb := float64(bytes) / (1 << 20)
			b.ReportMetric(mb/best[0].Seconds(), "MB/s-"+w+"-in-process")
			b.ReportMetric(mb/best[1].Seconds(), "MB/s-"+w+"-instance-manager")
			b.ReportMetric(best[1].Seconds()/best[0].Seconds(), "ratio-"+w)
		}
	}
}
