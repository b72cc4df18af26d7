package volumeengine

import (
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/replicaproto"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// BenchmarkEngineWritesThreeRemoteAgainstOneLocal measures 1 MiB
// sequential writes through the engine (64 MiB, one request at a time,
// then a sync) with three remote replicas, each behind a replica server
// of its own on loopback, over plain TCP and over mutual TLS, against the
// same writes through an engine with one local replica, in one run: the
// best of three rounds of each, the sides taking turns to go first.
// ratio-* is the local side's time over the remote one's, the remote
// engine's speed as a part of the local one's (the design's goal, step 7:
// at least 0.5).
func BenchmarkEngineWritesThreeRemoteAgainstOneLocal(b *testing.B) {
	const total, chunk = 64 << 20, 1 << 20
	data := make([]byte, chunk)
	_, _ = rand.Read(data)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Now())
	write := func(e *Engine) time.Duration {
		start := time.Now()
		for off := int64(0); off < total; off += chunk {
			if _, err := e.WriteAt(data, off); err != nil {
				b.Fatal(err)
			}
		}
		if err := e.Sync(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for i := 0; i < b.N; i++ {
		local, err := New("local", map[string]*replica.Replica{"a": newReplica(b, total)}, clk, logrus.NewEntry(log))
		if err != nil {
			b.Fatal(err)
		}
		id := mtlstest.Identity(b)
		sides := []struct {
			name   string
			engine *Engine
		}{{name: "local", engine: local}}
		for _, withTLS := range []bool{false, true} {
			opts := []Option{Term(testVolumeUID, fmt.Sprintf("bench-%d-%v", i, withTLS), 1)}
			var server *tls.Config
			name := "tcp"
			if withTLS {
				server, name = id.ServerConfig(), "mtls"
				opts = append(opts, ReplicaTLS(id.ClientConfig()))
			}
			for _, n := range []string{"a", "b", "c"} {
				opts = append(opts, Remote(n, serveReplicaTLS(b, n, newReplica(b, total), server)))
			}
			e, err := New("remote", nil, clk, logrus.NewEntry(log), opts...)
			if err != nil {
				b.Fatal(err)
			}
			sides = append(sides, struct {
				name   string
				engine *Engine
			}{name, e})
		}
		best := make([]time.Duration, len(sides))
		for round := range 3 {
			for k := range sides {
				side := (k + round) % len(sides)
				if took := write(sides[side].engine); best[side] == 0 || took < best[side] {
					best[side] = took
				}
			}
		}
		mb := float64(total) / (1 << 20)
		b.ReportMetric(mb/best[0].Seconds(), "MB/s-one-local")
		for k, s := range sides[1:] {
			b.ReportMetric(mb/best[k+1].Seconds(), "MB/s-three-remote-"+s.name)
			b.ReportMetric(best[0].Seconds()/best[k+1].Seconds(), "ratio-"+s.name)
		}
		for _, s := range sides {
			s.engine.Close()
		}
	}
}

// serveReplicaTLS is serveReplica over mutual TLS when config is not nil;
// it returns the server's address.
func serveReplicaTLS(tb testing.TB, name string, r *replica.Replica, config *tls.Config) string {
	tb.Helper()
	if config == nil {
		return serveReplica(tb, name, r).addr
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := replicaproto.NewServer(func(req replicaproto.OpenRequest) (replicaproto.Replica, error) {
		if req.Replica != name {
			return nil, fmt.Errorf("no replica %s here", req.Replica)
		}
		return r, nil
	}, logrus.NewEntry(log))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(l, config)
	tb.Cleanup(func() { l.Close(); s.Close() })
	return l.Addr().String()
}
