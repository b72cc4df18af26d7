package app

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
)

// serveCSI serves the CSI driver with opts against the manager of e on a
// socket of the test's own, as the sidecars and the kubelet reach it, and
// returns the socket and a stop (idempotent, also run when the test ends).
func serveCSI(t testing.TB, e *apiEnv, opts csi.Options) (sock string, stop func()) {
	t.Helper()
	d, err := csi.NewDriver(client.NewClient(e.base+"/v1", 10*time.Second), opts)
	if err != nil {
		t.Fatal(err)
	}
	// A unix socket's path is at most 107 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "csi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the CSI driver stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	eventually(t, 10*time.Second, "the CSI driver serves its socket", func() (bool, error) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	return sock, stop
}

// dialCSI connects to a driver's socket; the connection is closed when
// the test ends.
func dialCSI(t testing.TB, sock string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
