package engineapi

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/engine/rpc/rpctest"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// countingProxy forwards TCP connections to backend and counts them.
func countingProxy(t *testing.T, backend string) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int32
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return l.Addr().String(), &n
}

// Clients of Conns share one connection per address: many requests, one
// TCP connection and one handshake; a client's Close leaves it for the
// next; after Conns.Close no client is made.
func TestConnsShareOneConnectionPerAddress(t *testing.T) {
	e := rpctest.Engine(t, "vol", 4<<20, clock.RealClock{}, "r1")
	addr, dials := countingProxy(t, rpctest.Serve(t, e))
	conns := NewConns(mtlstest.Identity(t))
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		c, err := conns.Client(addr, "vol", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.VolumeGet(ctx); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("five requests through Conns made %d connections, want 1", n)
	}
	own, err := NewGRPCClient(addr, "vol", time.Second, mtlstest.Identity(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := own.VolumeGet(ctx); err != nil {
		t.Fatal(err)
	}
	own.Close()
	if n := dials.Load(); n != 2 {
		t.Errorf("a client of its own made %d connections in all, want 2", n)
	}
	conns.Close()
	if _, err := conns.Client(addr, "vol", time.Second); err == nil {
		t.Error("a closed Conns made a client")
	}
}
