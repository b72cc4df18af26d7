package api

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// liveServer serves the test server over real HTTP with the timeouts t.
func (s *testServer) live(t *testing.T, timeouts Timeouts) *httptest.Server {
	t.Helper()
	s.server.SetTimeouts(timeouts)
	srv := httptest.NewUnstartedServer(s.handler)
	cfg := HTTPServer(s.handler, timeouts)
	srv.Config.ReadHeaderTimeout, srv.Config.ReadTimeout = cfg.ReadHeaderTimeout, cfg.ReadTimeout
	srv.Config.WriteTimeout, srv.Config.IdleTimeout = cfg.WriteTimeout, cfg.IdleTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// A cross-site HTML form can send only form and text content types, and
// a browser marks it with Origin: none of them reaches a handler.
func TestCrossSiteFormPostRefused(t *testing.T) {
	s := newTestServer(t, &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol-0", Namespace: testNamespace}})
	post := func(path, body string, header ...string) (int, string) {
		method := http.MethodPost
		if strings.HasPrefix(path, "/v1/settings/") {
			method = http.MethodPut
		}
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		for i := 0; i+1 < len(header); i += 2 {
			if header[i] == "Host" {
				req.Host = header[i+1]
				continue
			}
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	for _, tc := range []struct {
		name, path, body string
		header           []string
		code             int
		want             string
	}{
		{"form detach", "/v1/volumes/vol-0?action=detach", "x=1", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "needs Content-Type: application/json"},
		{"text/plain JSON", "/v1/volumes/vol-0?action=detach", "{}", []string{"Content-Type", "text/plain"}, 415, `Content-Type \"text/plain\"`},
		{"multipart detach", "/v1/volumes/vol-0?action=detach", "", []string{"Content-Type", "multipart/form-data; boundary=x"}, 415, "application/json"},
		{"no type from a browser: Sec-Fetch-Site", "/v1/volumes/vol-0?action=detach", "", []string{"Sec-Fetch-Site", "same-site"}, 415, "even without a body"},
		{"an empty type", "/v1/volumes/vol-0?action=detach", "", []string{"Content-Type", ""}, 415, "even without a body"},
		{"json with a cross-site Origin", "/v1/volumes/vol-0?action=detach", "{}", []string{"Content-Type", "application/json", "Origin", "https://evil.example"}, 403, "another site"},
		{"Sec-Fetch-Site cross-site", "/v1/volumes/vol-0?action=detach", "{}", []string{"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"}, 403, "another site"},
		{"cross-site upload", "/v1/backingimages/up?action=upload&size=4", "", []string{"Content-Type", "multipart/form-data; boundary=x", "Origin", "http://evil.example"}, 403, "another site"},
		{"PUT form", "/v1/settings/x", "value=1", []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, "PUT needs"},
	} {
		if code, body := post(tc.path, tc.body, tc.header...); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	// JSON, with or without a body, and from the manager's own page, passes.
	if code, body := post("/v1/volumes/vol-0?action=detach", "", "Content-Type", "application/json; charset=utf-8",
		"Host", "192.0.2.10:9500", "Origin", "http://192.0.2.10:9500"); code != 200 {
		t.Errorf("same-origin JSON detach: %d %s", code, body)
	}
	// A page under a public name no Host check vouches for (the check is
	// off here) may be a rebinding site: refused, as its streams are.
	if code, body := post("/v1/volumes/vol-0?action=detach", "{}", "Content-Type", "application/json", "Origin", "http://example.com"); code != 403 {
		t.Errorf("a page under an unchecked public name: %d %s, want 403", code, body)
	}
	// Longhorn's UI posts body-less actions with no Content-Type: from a
	// page the browser vouches is the manager's own or the UI's (its
	// Origin, or Sec-Fetch-Site), they pass; so do those of a client that
	// is no browser and sends no Content-Type at all (Longhorn's python
	// client), while a form always sends one.
	for _, h := range [][]string{
		{"Host", "192.0.2.10:9500", "Origin", "http://192.0.2.10:9500"},
		{"Host", "127.0.0.1:9500", "X-Forwarded-Host", "10.0.0.5:8000", "Origin", "http://10.0.0.5:8000"},
		{"Sec-Fetch-Site", "same-origin"},
		{},
	} {
		if code, body := post("/v1/volumes/vol-0?action=snapshotPurge", "", h...); code == 415 || code == 403 {
			t.Errorf("snapshotPurge without a Content-Type from the UI's page or a script %v: %d %s", h, code, body)
		}
	}
	// Longhorn's UI behind its nginx: the Host is the manager's, the
	// browser's is in X-Forwarded-Host, and the page's Origin matches it.
	// Its writes pass, as its websocket streams do; a page of another
	// site sending the same is still refused.
	ui := []string{"Content-Type", "application/json", "X-Forwarded-Host", "10.0.0.5:8000", "Origin", "http://10.0.0.5:8000"}
	if code, body := post("/v1/volumes/vol-0?action=detach", "{}", ui...); code != 200 {
		t.Errorf("the UI's detach through its proxy: %d %s", code, body)
	}
	evil := []string{"Content-Type", "application/json", "X-Forwarded-Host", "10.0.0.5:8000", "Origin", "https://evil.example"}
	if code, body := post("/v1/volumes/vol-0?action=detach", "{}", evil...); code != 403 {
		t.Errorf("another site's page through the UI's proxy: %d %s, want 403", code, body)
	}
}

func TestHostCheckAgainstDNSRebinding(t *testing.T) {
	s := newTestServer(t)
	get := func(host string) (int, string) {
		req := httptest.NewRequest(http.MethodGet, "/v1/volumes", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	s.server.SetAllowedHosts([]string{"longhorn-backend", "*.longhorn.example.com"})
	for _, host := range []string{"127.0.0.1:9500", "10.42.0.7:9500", "[::1]:9500", "localhost:9500", "LOCALHOST", "ui.localhost",
		"longhorn-backend:9500", "longhorn-backend.", "a.longhorn.example.com", ""} {
		if code, body := get(host); code != 200 {
			t.Errorf("Host %q: %d %s", host, code, body)
		}
	}
	for _, host := range []string{"evil.example:9500", "longhorn-backend.evil.example", "longhorn.example.com", "127.0.0.1.nip.io"} {
		if code, body := get(host); code != http.StatusMisdirectedRequest || !strings.Contains(body, "--api-allowed-hosts") {
			t.Errorf("Host %q: %d %s, want 421", host, code, body)
		}
	}
	s.server.SetAllowedHosts([]string{"*"})
	if code, body := get("anything.example"); code != 200 {
		t.Errorf("with *: %d %s", code, body)
	}
}

// A websocket client that sends one endless message is cut off once it
// passes the read limit: the server never buffers more than that.
func TestStreamEndlessMessageCutOff(t *testing.T) {
	s := newTestServer(t)
	srv := s.live(t, Timeouts{})
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws/volumes", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	w, err := conn.NextWriter(websocket.TextMessage)
	if err != nil {
		t.Fatal(err)
	}
	chunk := []byte(strings.Repeat("x", 32<<10))
	sent := 0
	deadline := time.Now().Add(10 * time.Second)
	_ = conn.UnderlyingConn().SetWriteDeadline(deadline)
	for time.Now().Before(deadline) {
		n, err := w.Write(chunk)
		sent += n
		if err != nil {
			break
		}
	}
	// The server closed the connection after 4 KiB; what the client got
	// out before noticing sits in the kernel's socket buffers.
	if time.Now().After(deadline) {
		t.Fatalf("the server still took the message after %d bytes", sent)
	}
	if sent > 64<<20 {
		t.Errorf("%d bytes went out before the cut-off", sent)
	}
	t.Logf("cut off after %d bytes sent", sent)
	// The stream's slot is given back.
	eventually(t, "the slot released", func() bool {
		b := s.server.bounds()
		b.streams.mu.Lock()
		defer b.streams.mu.Unlock()
		return b.streams.open == 0
	})
}

// dialFrom opens a stream from a local address of its own: 127.0.0.2 is a
// second client on the loopback network.
func dialFrom(srv *httptest.Server, local string) (*websocket.Conn, *http.Response, error) {
	d := websocket.Dialer{NetDialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}).DialContext}
	return d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws/volumes", nil)
}

func TestStreamCapsPerClientAndInTotal(t *testing.T) {
	s := newTestServer(t)
	s.server.SetStreamLimits(3, 2)
	srv := s.live(t, Timeouts{})
	var open []*websocket.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for _, local := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2"} {
		c, _, err := dialFrom(srv, local)
		if err != nil {
			t.Fatalf("stream from %s: %v", local, err)
		}
		open = append(open, c)
	}
	refused := func(local, want string) {
		t.Helper()
		c, resp, err := dialFrom(srv, local)
		if err == nil {
			c.Close()
			t.Fatalf("a stream from %s over the cap was accepted", local)
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("stream from %s: %v %v, want 429", local, err, resp)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), want) {
			t.Errorf("429 %s does not say %q", body, want)
		}
	}
	refused("127.0.0.1", "at most 2 websocket streams at once per client address (127.0.0.1)")
	refused("127.0.0.2", "at most 3 websocket streams at once")
	open[0].Close()
	open = open[1:]
	eventually(t, "a slot freed by a client that left", func() bool {
		c, _, err := dialFrom(srv, "127.0.0.2")
		if err == nil {
			open = append(open, c)
		}
		return err == nil
	})
}

// The server's timeouts cut off a client that dribbles its headers, while
// a websocket stream outlives its read and write timeouts.
func TestServerTimeoutsSpareStreams(t *testing.T) {
	s := newTestServer(t)
	srv := s.live(t, Timeouts{ReadHeaderTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, IdleTimeout: time.Second})

	raw, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET /v1/volumes HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	if _, err := bufio.NewReader(raw).ReadString('\n'); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("slow headers: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a client dribbling its headers was held %s", d)
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/v1/ws/volumes", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: testNamespace}}
	if _, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Create(context.Background(), vol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil || !strings.Contains(string(msg), `"late"`) {
		t.Fatalf("the stream past the server's timeouts: %q %v", msg, err)
	}
}

// A 1 MiB body of 340,000 empty objects is refused (413, naming the rule)
// before it is decoded: it costs the manager a few times its size, not
// the 45 MB its decoding into structs took.
func TestABodyOfManyValuesIsRefusedBeforeDecoding(t *testing.T) {
	s := newTestServer(t)
	var b strings.Builder
	b.WriteString(`{"name":"v","size":"4Mi","recurringJobSelector":[`)
	for b.Len() < maxBodyBytes-16 {
		b.WriteString(`{},`)
	}
	b.WriteString(`{}]}`)
	body := b.String()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req := httptest.NewRequest("POST", "/v1/volumes", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	runtime.ReadMemStats(&after)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "JSON values") {
		t.Fatalf("%d %s, want 413 naming the rule", rec.Code, rec.Body.String())
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 8*maxBodyBytes {
		t.Errorf("refusing a %d-byte body allocated %d bytes", len(body), allocated)
	}
	// A body within the bound is decoded as before.
	if n := jsonValues([]byte(`{"a":[1,2,{"b":"x,y{["}],"c":"\"{"}`)); n != 6 {
		t.Errorf("jsonValues counted %d, want 6 (strings' commas and brackets not counted)", n)
	}
}

// Requests being served at once are capped in all and per client address
// (429 with Retry-After past either, once the wait for a slot is over:
// none here); the health checks are not counted, so the kubelet's probes
// get through a flood.
func TestRequestsAtOnceAreCapped(t *testing.T) {
	s := newTestServer(t)
	s.server.SetRequestLimits(3, 2, 0)
	hold := make(chan struct{})
	inside := make(chan struct{}, 10)
	h := s.server.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-hold
	}))
	send := func(from, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = from + ":40000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	var wg sync.WaitGroup
	for _, from := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.2"} {
		wg.Add(1)
		go func() { defer wg.Done(); send(from, "/v1/volumes") }()
		<-inside
	}
	for _, tc := range []struct{ from, want string }{
		{"10.0.0.1", "at most 2 requests at once per client address (10.0.0.1)"},
		{"10.0.0.3", "at most 3 requests at once"},
	} {
		rec := send(tc.from, "/v1/volumes")
		if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("from %s past the cap: %d %q, want 429 saying %q", tc.from, rec.Code, rec.Body.String(), tc.want)
		}
	}
	// The probes are not counted: served (held here) though every slot is taken.
	wg.Add(1)
	go func() { defer wg.Done(); send("10.0.0.1", "/healthz") }()
	<-inside
	close(hold)
	wg.Wait()
	if rec := send("10.0.0.1", "/v1/volumes"); rec.Code != http.StatusOK {
		t.Errorf("after the others ended: %d", rec.Code)
	}
}

// A request past the cap waits for a slot rather than fail at once: it is
// served when one frees within the wait.
func TestARequestPastTheCapWaitsForASlot(t *testing.T) {
	s := newTestServer(t)
	s.server.SetRequestLimits(1, 1, time.Minute)
	hold := make(chan struct{})
	inside := make(chan struct{}, 2)
	h := s.server.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- struct{}{}
		<-hold
	}))
	done := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/volumes", nil))
			done <- rec.Code
		}()
	}
	<-inside // one is served, the other waits
	select {
	case <-inside:
		t.Fatal("two requests inside a cap of one")
	case code := <-done:
		t.Fatalf("a request ended (%d) while the first held the slot", code)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	for i := 0; i < 2; i++ {
		if code := <-done; code != http.StatusOK {
			t.Errorf("request %d: %d, want both served", i, code)
		}
	}
}
