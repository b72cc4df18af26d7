// Package rpctest runs real engines behind the engine service on loopback,
// for tests of the engine's clients.
package rpctest

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
	"github.com/cadence-storage/longhorn-manager/engine/volumeengine"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// Engine returns the engine of volume over new replicas of size bytes in
// the test's temporary folder, one per name, closed when the test ends.
func Engine(t testing.TB, volume string, size int64, clk clock.Clock, replicaNames ...string) *volumeengine.Engine {
	t.Helper()
	replicas := map[string]*replica.Replica{}
	for _, name := range replicaNames {
		r, err := replica.Create(filepath.Join(t.TempDir(), name), size)
		if err != nil {
			t.Fatal(err)
		}
		replicas[name] = r
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	e, err := volumeengine.New(volume, replicas, clk, logrus.NewEntry(log))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Serve runs the engine service for e on a free 127.0.0.1 port until the
// test ends and returns its address. It requires mutual TLS with the
// test CA (mtlstest).
func Serve(t testing.TB, e *volumeengine.Engine) string {
	t.Helper()
	srv := rpc.NewServer()
	srv.Register(e)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := srv.GRPCServer(mtlstest.Identity(t).GRPCServerOption())
	go g.Serve(l)
	t.Cleanup(g.Stop)
	return l.Addr().String()
}
