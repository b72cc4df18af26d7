// Package fakedriver serves a CSI Identity service on a unix socket, for
// the tests of what calls the driver over its socket (the kubelet's
// registration, the liveness endpoint): its Probe answers ready, not
// ready, or not at all, as a test sets it.
package fakedriver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Driver is a CSI Identity service on a unix socket.
type Driver struct {
	csi.UnimplementedIdentityServer
	// Path is the socket's path, Endpoint its unix:// endpoint.
	Path, Endpoint string
	notReady       atomic.Bool
	hang           atomic.Bool
	srv            *grpc.Server
}

// SocketDir is a directory short enough for unix sockets (a test's
// TempDir can pass the 108 bytes a socket's path may have), removed when
// t ends.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// New returns a driver whose socket will be path; Start serves it.
func New(path string) *Driver {
	return &Driver{Path: path, Endpoint: "unix://" + path}
}

// Start serves the driver until Stop or the end of t.
func (d *Driver) Start(t testing.TB) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(d.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", d.Path)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = grpc.NewServer()
	csi.RegisterIdentityServer(d.srv, d)
	go func() { _ = d.srv.Serve(l) }()
	t.Cleanup(d.Stop)
}

// Stop stops serving and removes the socket.
func (d *Driver) Stop() {
	if d.srv != nil {
		d.srv.Stop()
	}
}

// SetReady sets what Probe answers.
func (d *Driver) SetReady(ready bool) { d.notReady.Store(!ready) }

// Hang makes Probe answer only when its caller gives up.
func (d *Driver) Hang() { d.hang.Store(true) }

func (d *Driver) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	if d.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(!d.notReady.Load())}, nil
}
