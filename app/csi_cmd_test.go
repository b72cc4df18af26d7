package app

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/csi/registration"
)

// serveCSI runs the Node service, its registration and /healthz
// together: the registration socket appears in the kubelet's directory,
// /healthz answers, and once the context ends all three stop and both
// sockets are gone.
func TestServeCSIRunsTheRegistrationAndHealthzBesideTheDriver(t *testing.T) {
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	regDir := filepath.Join(dir, "plugins_registry")
	if err := os.Mkdir(regDir, 0o700); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "plugins", csi.DriverName, "csi.sock")
	endpoint := "unix://" + socket
	// No manager: the driver answers Probe "not ready", and is alive.
	d, err := csi.NewDriver(client.NewClient("http://127.0.0.1:1/v1", time.Second), csi.Options{NodeID: "node-1", StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	r, err := registration.New(registration.Options{CSIEndpoint: endpoint, KubeletEndpoint: "/var/lib/kubelet/plugins/driver.longhorn.io/csi.sock", Dir: regDir, ProbeInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthAddr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveCSI(ctx, d, endpoint, r, healthAddr, 3*time.Second) }()
	defer func() { cancel(); <-done }()

	waitFor(t, "the registration socket", func() bool { _, err := os.Stat(r.SocketPath()); return err == nil })
	var body string
	waitFor(t, "/healthz to answer 200", func() bool {
		resp, err := http.Get("http://" + healthAddr + "/healthz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	if !strings.Contains(body, "not ready") {
		t.Errorf("/healthz of a driver without its manager answers %q, want it to say not ready", body)
	}

	cancel()
	select {
	case err := <-done:
		done <- err
		if err != nil {
			t.Fatalf("serveCSI: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serveCSI did not return once its context ended")
	}
	for _, path := range []string{r.SocketPath(), socket} {
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s outlives serveCSI (stat: %v)", path, err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
