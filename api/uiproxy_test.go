package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The UI's nginx serves the UI's files to GET and HEAD only: a POST to a
// page (the UI posts to one when an action has no link) is a 405, never
// index.html with a 200 the UI would take for success.
func TestUIProxyServesFilesToGETOnly(t *testing.T) {
	dist := t.TempDir()
	if err := os.WriteFile(filepath.Join(dist, "index.html"), []byte("<html>ui</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	manager, _ := url.Parse("http://127.0.0.1:1")
	h := UIProxy(dist, manager, nil, nil)
	for _, tc := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/", 200}, {"HEAD", "/", 200}, {"GET", "/volume/x", 200},
		{"POST", "/", 405}, {"POST", "/index.html", 405}, {"PUT", "/volume", 405}, {"DELETE", "/", 405},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader("{}")))
		if rec.Code != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.code)
		}
		if tc.code == 405 && rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q", tc.method, tc.path, rec.Header().Get("Allow"))
		}
	}
}

// DNS rebinding through the UI: a page whose name was made to resolve to
// the UI's address reaches the manager through the proxy with the
// manager's Host, but its own name in X-Forwarded-Host; the manager's
// Host check judges that name too. The UI reached by IP address,
// localhost or a name given to --api-allowed-hosts is served.
func TestRebindingThroughTheUIProxyIsRefused(t *testing.T) {
	s := newTestServer(t)
	s.server.SetAllowedHosts([]string{"longhorn.example.com"})
	manager := s.live(t, Timeouts{})
	managerURL, _ := url.Parse(manager.URL)
	ui := httptest.NewServer(UIProxy(t.TempDir(), managerURL, nil, nil))
	t.Cleanup(ui.Close)
	for _, tc := range []struct {
		host string
		code int
	}{
		{"evil.example", http.StatusMisdirectedRequest},
		{"evil.example:8000", http.StatusMisdirectedRequest},
		{"longhorn.example.com", http.StatusOK},
		{"localhost:8000", http.StatusOK},
		{"longhorn-frontend", http.StatusOK},
		{"longhorn-frontend.longhorn-system.svc:80", http.StatusOK},
		{strings.TrimPrefix(ui.URL, "http://"), http.StatusOK},
	} {
		req, _ := http.NewRequest("GET", ui.URL+"/v1/volumes", nil)
		req.Host = tc.host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("through the UI as %s: %d %s, want %d", tc.host, resp.StatusCode, body, tc.code)
		}
		if tc.code == http.StatusMisdirectedRequest && !strings.Contains(string(body), "X-Forwarded-Host") {
			t.Errorf("the refusal does not say why: %s", body)
		}
	}
}

// With the UI's identity set, every request the proxy passes on carries
// the UI's token and never the browser's: a caller cannot pass a token of
// its own (or a stolen one) through the UI, and a request with none still
// reaches the manager as the UI. The token is asked for on each request,
// so a rotated one is used at once.
func TestUIProxySendsTheUIsOwnIdentity(t *testing.T) {
	var got []string
	manager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}))
	t.Cleanup(manager.Close)
	managerURL, _ := url.Parse(manager.URL)
	token := "ui-token-1"
	ui := httptest.NewServer(UIProxy(t.TempDir(), managerURL, func() string { return token }, nil))
	t.Cleanup(ui.Close)
	send := func(auth string) {
		req, _ := http.NewRequest("GET", ui.URL+"/v1/volumes", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("")
	send("Bearer tenant-token")
	send("Basic dXNlcjpwYXNz")
	token = "ui-token-2"
	send("")
	token = ""
	send("Bearer tenant-token")
	want := []string{"Bearer ui-token-1", "Bearer ui-token-1", "Bearer ui-token-1", "Bearer ui-token-2", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the manager saw %q, want %q", got, want)
	}
}
