package client

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An in-process client's request reaches the handler as a server would
// receive it (method, path and query, body, token, a loopback Host the
// API's Host check allows), and the handler's answer comes back as over
// the network: its status, the header as written with it, its body.
func TestInProcessRequestsReachTheHandlerAsOverTheNetwork(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/volumes/vol" && (r.Method != http.MethodPost || r.URL.Host != "" || r.URL.Path != "/v1/volumes/vol" || r.URL.Query().Get("action") != "snapshotCreate" ||
			r.RequestURI != "/v1/volumes/vol?action=snapshotCreate" || string(body) != `{"name":"s1"}` ||
			r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" ||
			!strings.HasSuffix(r.Host, ".localhost") || r.RemoteAddr == "" || r.ProtoMajor != 1) {
			t.Errorf("the handler got %s %s (URI %q) Host %q from %q, body %q, header %v", r.Method, r.URL, r.RequestURI, r.Host, r.RemoteAddr, body, r.Header)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Header().Set("X-After", "ignored") // as a server ignores it
		_, _ = w.Write([]byte(`{"name":"s1","created":"2026-11-27T00:00:00Z"}`))
	})
	c := NewInProcess(h, time.Second)
	c.Token = func() string { return "tok" }
	var snap Snapshot
	if err := c.do(context.Background(), http.MethodPost, "/v1/volumes/vol?action=snapshotCreate", map[string]string{"name": "s1"}, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Name != "s1" || snap.Created == "" {
		t.Errorf("decoded %+v", snap)
	}

	resp, err := c.http.Get(c.base + "/v1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-After") != "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("header %v: want what was set before the status, only", resp.Header)
	}
}

// An answer the client retries over the network (a 5xx) is retried in
// process too, and a 4xx is the API's error, not retried.
func TestInProcessAnswersAreRetriedAsOverTheNetwork(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/missing":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"error","status":404,"code":"NotFound","message":"volume \"missing\" not found"}`))
		case calls.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(`{}`)) // no WriteHeader: 200
		}
	})
	c := NewInProcess(h, 5*time.Second)
	if err := c.do(context.Background(), http.MethodGet, "/v1/volumes", nil, &struct{}{}); err != nil {
		t.Fatalf("a 503 then a 200: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d calls, want the 503 retried once", n)
	}
	err := c.do(context.Background(), http.MethodGet, "/v1/missing", nil, nil)
	if !IsNotFound(err) || !strings.Contains(err.Error(), `volume "missing" not found`) {
		t.Errorf("a 404: %v", err)
	}
}

// A handler's panic is the request's error, not the caller's crash.
func TestInProcessHandlerPanicIsAnError(t *testing.T) {
	c := NewInProcess(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), 0)
	err := c.do(context.Background(), http.MethodGet, "/v1/volumes", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "panicked: boom") {
		t.Errorf("a panicking handler: %v", err)
	}
}
