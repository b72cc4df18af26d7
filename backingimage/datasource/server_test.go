package datasource

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// newDisk makes a folder that looks like a node's disk.
func newDisk(t testing.TB, uuid string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"diskName":"d","diskUUID":%q}`, uuid)
	if err := os.WriteFile(filepath.Join(dir, backingimage.DiskConfigFile), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func randomBytes(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	// A run of zeros, so sparse writing is exercised too.
	clear(b[n/4 : n/2])
	return b
}

func sha(b []byte) string {
	s := sha512.Sum512(b)
	return hex.EncodeToString(s[:])
}

func quietLog() logrus.FieldLogger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return l
}

// start runs a data source on a fresh disk behind an httptest server.
func start(t *testing.T, cfg Config) (*Server, *Client) {
	t.Helper()
	if cfg.DiskPath == "" {
		cfg.DiskUUID = "disk-1"
		cfg.DiskPath = newDisk(t, cfg.DiskUUID)
	}
	if cfg.Name == "" {
		cfg.Name, cfg.UUID = "image", "u1"
	}
	cfg.Log = quietLog()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, NewClient(mtlstest.ServeHTTPS(t, s.Handler()), mtlstest.Identity(t))
}

// waitState polls until the file leaves the working states.
func waitState(t *testing.T, c *Client, within time.Duration) *FileStatus {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := c.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		switch st.State {
		case longhorn.BackingImageStateFailed, longhorn.BackingImageStateReadyForTransfer:
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s after %s: %+v", st.State, within, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func wantFailed(t *testing.T, st *FileStatus, fragments ...string) {
	t.Helper()
	if st.State != longhorn.BackingImageStateFailed {
		t.Fatalf("state %s, want failed: %+v", st.State, st)
	}
	for _, f := range fragments {
		if !strings.Contains(st.Message, f) {
			t.Errorf("message %q does not say %q", st.Message, f)
		}
	}
}

func download(url string) map[string]string { return map[string]string{"url": url} }

func TestDownloadPreparesAVerifiedFile(t *testing.T) {
	data := randomBytes(t, 3<<20+123)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "image.raw", time.Time{}, bytes.NewReader(data))
	}))
	defer src.Close()
	s, c := start(t, Config{SourceType: "download", Parameters: download(src.URL + "/image.raw"), ExpectedChecksum: sha(data)})
	st := waitState(t, c, 10*time.Second)
	if st.State != longhorn.BackingImageStateReadyForTransfer || st.Checksum != sha(data) || st.Size != int64(len(data)) || st.Progress != 100 {
		t.Fatalf("status %+v", st)
	}
	got, err := os.ReadFile(filepath.Join(s.cfg.DiskPath, st.Path))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the prepared file differs from the source (%v)", err)
	}
	tr, err := c.Transfer(context.Background())
	if err != nil || !tr.Transferred {
		t.Fatalf("transfer: %+v, %v", tr, err)
	}
	body, n, err := c.Content(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	streamed, _ := io.ReadAll(body)
	body.Close()
	if n != int64(len(data)) || !bytes.Equal(streamed, data) {
		t.Fatal("the streamed content differs from the source")
	}
}

func TestDownloadFaults(t *testing.T) {
	data := randomBytes(t, 1<<20)
	var stall = make(chan struct{})
	t.Cleanup(func() { close(stall) })
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Write(data)
		case "/stall-midway":
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:1000])
			w.(http.Flusher).Flush()
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		case "/no-answer":
			select {
			case <-stall:
			case <-r.Context().Done():
			}
		case "/cut-off":
			// Promise more than is sent, then drop the connection.
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		default:
			http.NotFound(w, r)
		}
	}))
	defer src.Close()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	unreachable := "http://" + closed.Addr().String() + "/image"
	closed.Close()
	wrongSum := strings.Repeat("0", 128)

	cases := []struct {
		name      string
		url       string
		checksum  string
		fragments []string
	}{
		{"wrong checksum", src.URL + "/ok", wrongSum, []string{"checksum mismatch", "want " + wrongSum}},
		{"stall midway", src.URL + "/stall-midway", "", []string{"no data received for 200ms", "after 1000 bytes"}},
		{"server that never answers", src.URL + "/no-answer", "", []string{"no data received for 200ms"}},
		{"unreachable URL", unreachable, "", []string{"download " + unreachable, "connection refused"}},
		{"missing file", src.URL + "/missing", "", []string{"404 Not Found"}},
		{"cut off before the announced size", src.URL + "/cut-off", "", []string{"cut off after", fmt.Sprintf("of %d bytes", len(data))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := start(t, Config{SourceType: "download", Parameters: download(tc.url), ExpectedChecksum: tc.checksum, StallTimeout: 200 * time.Millisecond})
			wantFailed(t, waitState(t, c, 10*time.Second), tc.fragments...)
			if _, err := os.Stat(s.finalPath()); !os.IsNotExist(err) {
				t.Errorf("a failed download left a file at %s", s.finalPath())
			}
			if _, err := c.Transfer(context.Background()); err == nil {
				t.Error("a failed file was handed over")
			}
		})
	}
}

func TestDownloadCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100000000")
		for {
			if _, err := w.Write(make([]byte, 4096)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(time.Millisecond):
			}
		}
	}))
	defer src.Close()
	_, c := start(t, Config{SourceType: "download", Parameters: download(src.URL)})
	for {
		st, _ := c.Get(context.Background())
		if st.ProcessedSize > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Cancel(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantFailed(t, waitState(t, c, 5*time.Second), "cancelled by request")
	if _, err := c.Cancel(context.Background()); err == nil {
		t.Error("a second cancel of a failed file succeeded")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	disk := newDisk(t, "disk-1")
	base := Config{Name: "image", UUID: "u1", DiskPath: disk, DiskUUID: "disk-1", SourceType: "upload"}
	cases := []struct {
		name     string
		mutate   func(*Config)
		fragment string
	}{
		{"name with a slash", func(c *Config) { c.Name = "../etc" }, "name \"../etc\""},
		{"empty uuid", func(c *Config) { c.UUID = "" }, "uuid \"\""},
		{"short checksum", func(c *Config) { c.ExpectedChecksum = "abc" }, "checksum \"abc\""},
		{"wrong disk", func(c *Config) { c.DiskUUID = "disk-2" }, "has UUID disk-1, want disk-2"},
		{"unknown source", func(c *Config) { c.SourceType = "copy" }, "source type \"copy\""},
		{"file URL", func(c *Config) { c.SourceType = "download"; c.Parameters = download("file:///etc/passwd") }, "parameter url"},
		{"export without volume", func(c *Config) { c.SourceType = "export-from-volume" }, "parameter volume-name"},
		{"export to vmdk", func(c *Config) {
			c.SourceType = "export-from-volume"
			c.Parameters = map[string]string{"volume-name": "v", "snapshot-name": "s", "export-type": "vmdk"}
		}, "parameter export-type \"vmdk\""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.fragment) {
				t.Fatalf("New: %v, want an error saying %q", err, tc.fragment)
			}
		})
	}
}

func TestCloseRemovesTheTemporaryFolder(t *testing.T) {
	disk := newDisk(t, "disk-1")
	s, err := New(Config{Name: "image", UUID: "u1", DiskPath: disk, DiskUUID: "disk-1", SourceType: "upload", Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.folder); err != nil {
		t.Fatalf("no temporary folder after Start: %v", err)
	}
	s.Close()
	if _, err := os.Stat(s.folder); !os.IsNotExist(err) {
		t.Fatalf("the temporary folder survived Close: %v", err)
	}
}
