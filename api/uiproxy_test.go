package api

import (
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
	h := UIProxy(dist, manager)
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
