package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An https:// manager URL is checked with the CA file, whose absence is
// the calls' error, naming it; a URL that is neither http:// nor https://
// is refused, naming the flag.
func TestNewAPIClient(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca.crt")
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	api, err := newAPIClient(srv.URL+"/v1", time.Second, missing)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Volume(context.Background(), "vol"); err == nil || !strings.Contains(err.Error(), "read the internal CA bundle") {
		t.Errorf("a call over https without the CA file: %v", err)
	}
	if _, err := newAPIClient("http://longhorn-backend:9500/v1", time.Second, missing); err != nil {
		t.Errorf("http needs no CA file: %v", err)
	}
	for _, bad := range []string{"longhorn-backend:9500", "ftp://x/v1", "https:///v1"} {
		if _, err := newAPIClient(bad, time.Second, missing); err == nil || !strings.Contains(err.Error(), "--manager-url") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
