package datasource

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/netguard"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A download larger than MaxDownloadSize fails, whether the server says
// so up front or streams without a length.
func TestDownloadSizeBound(t *testing.T) {
	content := randomBytes(t, 2<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length
		} else {
			w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		}
		w.Write(content)
	}))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{"/sized": "announces 2097152 bytes, more than the 1048576", "/chunked": "more than 1048576 bytes"} {
		_, c := start(t, Config{Name: "img", UUID: "u1", SourceType: longhorn.BackingImageDataSourceTypeDownload,
			Parameters: download(srv.URL + path), MaxDownloadSize: 1 << 20, Log: quietLog()})
		wantFailed(t, waitState(t, c, 10*time.Second), want)
	}
	_, c := start(t, Config{Name: "img", UUID: "u1", SourceType: longhorn.BackingImageDataSourceTypeDownload,
		Parameters: download(srv.URL + "/sized"), MaxDownloadSize: 2 << 20, ExpectedChecksum: sha(content), Log: quietLog()})
	if st := waitState(t, c, 10*time.Second); st.State != longhorn.BackingImageStateReadyForTransfer {
		t.Fatalf("a download of exactly the bound: %+v", st)
	}
}

// With the guard's client, a URL whose name resolves to loopback fails
// with the reason, and the server behind it is never asked.
func TestDownloadGuardRefusesLoopback(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write([]byte("internal"))
	}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	_, c := start(t, Config{Name: "img", UUID: "u1", SourceType: longhorn.BackingImageDataSourceTypeDownload,
		Parameters: download(fmt.Sprintf("http://localhost:%d/x", port)), HTTPClient: netguard.New(netguard.Options{}).HTTPClient(), Log: quietLog()})
	wantFailed(t, waitState(t, c, 10*time.Second), "loopback", "refused")
	if hits.Load() != 0 {
		t.Fatal("the refused server was asked")
	}
	// Allowed, the same server serves.
	allow := netguard.New(netguard.Options{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	_, c = start(t, Config{Name: "img", UUID: "u1", SourceType: longhorn.BackingImageDataSourceTypeDownload,
		Parameters: download(fmt.Sprintf("http://localhost:%d/x", port)), HTTPClient: allow.HTTPClient(), Log: quietLog()})
	if st := waitState(t, c, 10*time.Second); st.State != longhorn.BackingImageStateReadyForTransfer {
		t.Fatalf("with loopback allowed: %+v", st)
	}
}
