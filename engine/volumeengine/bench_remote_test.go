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
// best of five rounds of each in every iteration, over all iterations,
// the sides taking turns to go first. Every replica is a fresh one in a
// temporary folder of the same filesystem, written from the same buffer.
// ratio-* is the local side's time over the remote one's, the remote
// engine's speed as a part of the local one's (the design's goal, step 7:
// at least 0.5).
//
// On one machine the three remote replicas' servers share its processors
// and its disk with the engine: the remote side copies every byte three
// times through loopback and into three files, and syncs three files to
// the one disk, where the local side writes and syncs one. An engine with
// three local replicas (MB/s-three-local, ratio-*-of-three-local) does
// the same storage work without the protocol (one replica after the
// other, as the engine writes local ones): that ratio is near what the
// protocol itself costs.
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
	const rounds = 5
	names := []string{"one-local", "three-local", "three-remote-tcp", "three-remote-mtls"}
	short := []string{"", "", "tcp", "mtls"}
	best := make([]time.Duration, len(names))
	for i := 0; i < b.N; i++ {
		id := mtlstest.Identity(b)
		engines := make([]*Engine, len(names))
		var err error
		if engines[0], err = New("local", map[string]*replica.Replica{"a": newReplica(b, total)}, clk, logrus.NewEntry(log)); err != nil {
			b.Fatal(err)
		}
		three := map[string]*replica.Replica{}
		for _, n := range []string{"a", "b", "c"} {
			three[n] = newReplica(b, total)
		}
		if engines[1], err = New("local3", three, clk, logrus.NewEntry(log)); err != nil {
			b.Fatal(err)
		}
		for k, withTLS := range []bool{false, true} {
			opts := []Option{Term(testVolumeUID, fmt.Sprintf("bench-%d-%v", i, withTLS), 1)}
			var server *tls.Config
			if withTLS {
				server = id.ServerConfig()
				opts = append(opts, ReplicaTLS(id.ClientConfig()))
			}
			for _, n := range []string{"a", "b", "c"} {
				opts = append(opts, Remote(n, serveReplicaTLS(b, n, newReplica(b, total), server)))
			}
			if engines[2+k], err = New("remote", nil, clk, logrus.NewEntry(log), opts...); err != nil {
				b.Fatal(err)
			}
		}
		for round := range rounds {
			for k := range engines {
				side := (k + round) % len(engines)
				if took := write(engines[side]); best[side] == 0 || took < best[side] {
					best[side] = took
				}
			}
		}
		for _, e := range engines {
			e.Close()
		}
	}
	mb := float64(total) / (1 << 20)
	for k, name := range names {
		b.ReportMetric(mb/best[k].Seconds(), "MB/s-"+name)
	}
	for _, k := range []int{2, 3} {
		b.ReportMetric(best[0].Seconds()/best[k].Seconds(), "ratio-"+short[k])
		b.ReportMetric(best[1].Seconds()/best[k].Seconds(), "ratio-"+short[k]+"-of-three-local")
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
