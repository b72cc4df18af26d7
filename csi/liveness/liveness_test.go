package liveness

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/cadence-storage/longhorn-manager/csi/internal/fakedriver"
)

func startDriver(t *testing.T) *fakedriver.Driver {
	t.Helper()
	d := fakedriver.New(filepath.Join(fakedriver.SocketDir(t), "csi.sock"))
	d.Start(t)
	return d
}

// healthz asks h what the kubelet's httpGet probe asks.
func healthz(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return rec.Code, rec.Body.String()
}

func TestHealthzIsOKWhenTheDriverAnswersReady(t *testing.T) {
	d := startDriver(t)
	code, body := healthz(t, &Handler{Endpoint: d.Endpoint})
	if code != http.StatusOK || body != "ok\n" {
		t.Fatalf("/healthz answers %d %q, want 200 ok", code, body)
	}
}

func TestHealthzIsOKAndSaysSoWhenTheDriverAnswersNotReady(t *testing.T) {
	d := startDriver(t)
	d.SetReady(false)
	code, body := healthz(t, &Handler{Endpoint: d.Endpoint})
	if code != http.StatusOK || !strings.Contains(body, "not ready") {
		t.Fatalf("/healthz answers %d %q, want 200 saying the driver is not ready", code, body)
	}
}

func TestHealthzFailsWithTheReasonWhenTheDriverIsStopped(t *testing.T) {
	d := startDriver(t)
	logger, logs := logtest.NewNullLogger()
	h := &Handler{Endpoint: d.Endpoint, Log: logrus.NewEntry(logger)}
	if code, _ := healthz(t, h); code != http.StatusOK {
		t.Fatalf("/healthz answers %d while the driver serves", code)
	}
	d.Stop()
	code, body := healthz(t, h)
	if code != http.StatusInternalServerError || !strings.Contains(body, d.Path) {
		t.Fatalf("/healthz answers %d %q once the driver stopped, want 500 naming its socket", code, body)
	}
	if e := logs.LastEntry(); e == nil || e.Level != logrus.WarnLevel || e.Data["endpoint"] != d.Endpoint {
		t.Errorf("the failed check is not logged with its endpoint: %v", e)
	}
}

func TestHealthzFailsInTimeWhenTheProbeHangs(t *testing.T) {
	d := startDriver(t)
	d.Hang()
	start := time.Now()
	code, body := healthz(t, &Handler{Endpoint: d.Endpoint, ProbeTimeout: 200 * time.Millisecond})
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("/healthz took %s with a 200ms probe timeout", took)
	}
	if code != http.StatusInternalServerError || !strings.Contains(body, "did not answer its Probe within 200ms") {
		t.Fatalf("/healthz answers %d %q for a hung driver, want 500 saying it did not answer in time", code, body)
	}
}

func TestHealthzServesOnlyGetOfHealthz(t *testing.T) {
	d := startDriver(t)
	h := &Handler{Endpoint: d.Endpoint}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET /metrics answers %d, want 404", rec.Code)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/healthz", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /healthz answers %d, want 405", rec.Code)
	}
}

func TestServeAnswersOnItsAddressUntilItsContextEnds(t *testing.T) {
	d := startDriver(t)
	// A free port: the address is given as host:port, as in package/.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, &Handler{Endpoint: d.Endpoint}) }()
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Get("http://" + addr + "/healthz"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("GET /healthz answers %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return once its context ended")
	}
}
