package csi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/client"
)

// serveDriver serves a Node service driver, whose manager is api, on a
// unix socket, and returns its endpoint.
func serveDriver(t *testing.T, api http.Handler) string {
	t.Helper()
	manager := httptest.NewServer(api)
	t.Cleanup(manager.Close)
	d, err := NewDriver(client.NewClient(manager.URL+"/v1", 30*time.Second), Options{NodeID: "node-1"})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "csi.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	srv := d.NewServer()
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return "unix://" + path
}

// TestProbeAnswersNotReadyBeforeItsCallerGivesUp: while the manager does
// not answer, a Probe with a short deadline (the liveness endpoint's) is
// answered "not ready" in time, not left to expire: the driver is alive.
func TestProbeAnswersNotReadyBeforeItsCallerGivesUp(t *testing.T) {
	endpoint := serveDriver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a manager that never answers
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	ready, err := ProbeSocket(ctx, endpoint)
	if err != nil {
		t.Fatalf("Probe with a manager that does not answer: %v, want an answer (not ready) within the caller's deadline", err)
	}
	if ready {
		t.Fatal("the driver is ready while its manager does not answer")
	}
}

func TestProbeAnswersReadyWhenTheManagerAnswers(t *testing.T) {
	endpoint := serveDriver(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"backup-target","name":"backup-target","value":""}`))
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ready, err := ProbeSocket(ctx, endpoint)
	if err != nil || !ready {
		t.Fatalf("Probe: ready %v, %v; want ready", ready, err)
	}
}

func TestProbeBudgetLeavesRoomBeforeTheCallersDeadline(t *testing.T) {
	if got := probeBudget(context.Background()); got != probeTimeout {
		t.Errorf("without a deadline the manager gets %s, want %s", got, probeTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if got := probeBudget(ctx); got > 750*time.Millisecond || got < 500*time.Millisecond {
		t.Errorf("with a 1s deadline the manager gets %s, want about 750ms", got)
	}
}
