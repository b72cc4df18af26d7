package s3test

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is one request a Counter passed on: its kind (LIST, GET, HEAD,
// PUT, DELETE, POST), and the object key it names or the prefix it lists,
// in the bucket.
type Request struct {
	Kind string
	Key  string
}

// Counter is a reverse proxy on 127.0.0.1 in front of a Server that
// records every request sent through it, as the server's access log
// would: point a client at Endpoint (Credential does) to count what it
// sends. It stops when the test ends.
type Counter struct {
	// Endpoint is the proxy's URL, http://127.0.0.1:<port>.
	Endpoint string

	srv    *Server
	mu     sync.Mutex
	record []Request
	// ended is when the server's answer to each request of record was
	// passed on, by index (zero while it runs).
	ended []time.Time
}

// Counter starts a counting proxy in front of the server.
func (s *Server) Counter(t testing.TB) *Counter {
	t.Helper()
	target, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &Counter{Endpoint: "http://" + l.Addr().String(), srv: s}
	// The Host header stays the proxy's: the client signed it.
	proxy := httputil.NewSingleHostReverseProxy(target)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.record = append(c.record, classify(r, s.Bucket))
		c.ended = append(c.ended, time.Time{})
		i := len(c.record) - 1
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
		c.mu.Lock()
		if i < len(c.ended) {
			c.ended[i] = time.Now()
		}
		c.mu.Unlock()
	})}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return c
}

// classify names a path-style request: a GET of the bucket is a LIST of
// its prefix parameter.
func classify(r *http.Request, bucket string) Request {
	key := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"+bucket), "/")
	if r.Method == http.MethodGet && key == "" {
		return Request{Kind: "LIST", Key: r.URL.Query().Get("prefix")}
	}
	return Request{Kind: r.Method, Key: key}
}

// Credential is the data of a backup-target-credential-secret that sends
// every request through the counter.
func (c *Counter) Credential() map[string]string {
	cred := c.srv.Credential()
	cred["AWS_ENDPOINTS"] = c.Endpoint
	return cred
}

// Requests are the requests passed on since the start or the last Reset.
func (c *Counter) Requests() []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Request(nil), c.record...)
}

// Count is how many requests were passed on since the start or the last
// Reset.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.record)
}

// Reset forgets the requests recorded.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record, c.ended = nil, nil
}

// LastEnded is when the answer to the last request of that kind whose key
// starts with prefix was passed on, since the start or the last Reset;
// false when there is none, or it has not been answered. A backup's last
// request is the DELETE of its lock (backupstore/volumes/<volume>/locks/backup-):
// its end is, within the engine's own bookkeeping, the backup's end.
func (c *Counter) LastEnded(kind, prefix string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.record) - 1; i >= 0; i-- {
		if r := c.record[i]; r.Kind == kind && strings.HasPrefix(r.Key, prefix) {
			return c.ended[i], !c.ended[i].IsZero()
		}
	}
	return time.Time{}, false
}
