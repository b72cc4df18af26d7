package api

import (
	"context"
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Timeouts bound how long one connection may hold the HTTP server. The
// upload action and websocket streams lift ReadTimeout and WriteTimeout
// for themselves: an upload must instead make progress every
// UploadIdleTimeout, a stream must answer the pings.
type Timeouts struct {
	// ReadHeaderTimeout bounds the wait for a request's headers (a client
	// that dribbles them, slowloris, is cut off).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request, body included.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the
	// end of the answer.
	WriteTimeout time.Duration
	// IdleTimeout bounds a kept-alive connection between requests.
	IdleTimeout time.Duration
	// UploadIdleTimeout bounds an upload's wait for its next bytes.
	UploadIdleTimeout time.Duration
}

// DefaultTimeouts are the daemon's: no handler but the upload reads more
// than a 64 KiB JSON body, and none waits long.
var DefaultTimeouts = Timeouts{
	ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout:       time.Minute,
	WriteTimeout:      2 * time.Minute,
	IdleTimeout:       2 * time.Minute,
	UploadIdleTimeout: time.Minute,
}

// Limits on websocket streams.
const (
	// maxStreamMessage is the largest message a stream client may send:
	// the streams only send, so a client needs none but control frames.
	maxStreamMessage = 4 << 10
	// pongWait is how long a stream waits for any frame from its client,
	// a pong to the ping every pingPeriod among them.
	pongWait = 2*pingPeriod + writeWait
	// DefaultMaxStreams and DefaultMaxStreamsPerClient cap the open
	// streams in all and from one client address.
	DefaultMaxStreams          = 1000
	DefaultMaxStreamsPerClient = 50
)

// DefaultMaxRequests and DefaultMaxRequestsPerClient cap the requests
// being served at once, in all and from one client address (websocket
// streams, capped on their own, and the open health checks not counted):
// each holds up to a 1 MiB body and what answering it builds, so the
// caps bound the memory a flood of requests can take.
// A request past a cap waits up to DefaultRequestSlotWait for a slot
// (its body not yet read), then is answered 429.
const (
	DefaultMaxRequests          = 256
	DefaultMaxRequestsPerClient = 64
	DefaultRequestSlotWait      = 5 * time.Second
)

// HTTPServer returns the server of handler with the timeouts t, the
// defaults for any left zero.
func HTTPServer(handler http.Handler, t Timeouts) *http.Server {
	t = t.withDefaults()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: t.ReadHeaderTimeout,
		ReadTimeout:       t.ReadTimeout,
		WriteTimeout:      t.WriteTimeout,
		IdleTimeout:       t.IdleTimeout,
	}
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.ReadHeaderTimeout, &d.ReadHeaderTimeout}, {&t.ReadTimeout, &d.ReadTimeout},
		{&t.WriteTimeout, &d.WriteTimeout}, {&t.IdleTimeout, &d.IdleTimeout},
		{&t.UploadIdleTimeout, &d.UploadIdleTimeout},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// SetTimeouts tells the handlers the server's timeouts (the upload's idle
// bound, and the write deadline it restores); DefaultTimeouts otherwise.
func (s *Server) SetTimeouts(t Timeouts) {
	s.bounds().timeouts = t.withDefaults()
}

// SetAllowedHosts turns on the Host check against DNS rebinding: a
// request is served only when its Host is an IP address, a loopback name
// (localhost, *.localhost), or one of names (host names, without port; a
// leading "*." matches any subdomain; "*" alone turns the check off).
// Without it a web page whose own name was made to resolve to the
// manager's address could drive the API from a browser on the cluster
// network.
func (s *Server) SetAllowedHosts(names []string) {
	b := s.bounds()
	b.checkHost = true
	b.hosts = nil
	for _, n := range names {
		n = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(n), "."))
		if n == "*" {
			b.checkHost = false
		}
		if n != "" {
			b.hosts = append(b.hosts, n)
		}
	}
}

// SetStreamLimits caps the open websocket streams in all and per client
// address.
func (s *Server) SetStreamLimits(total, perClient int) {
	b := s.bounds()
	b.streams.mu.Lock()
	b.streams.total, b.streams.perClient = total, perClient
	b.streams.mu.Unlock()
}

// SetRequestLimits caps the requests served at once in all and per
// client address; a request past a cap waits up to wait for a slot.
func (s *Server) SetRequestLimits(total, perClient int, wait time.Duration) {
	b := s.bounds()
	b.requests.mu.Lock()
	b.requests.total, b.requests.perClient = total, perClient
	b.requestWait = wait
	b.requests.mu.Unlock()
}

// limits is the server's bounds on its inputs.
type limits struct {
	timeouts  Timeouts
	checkHost bool
	hosts     []string
	streams   streamSlots
	requests  streamSlots
	// requestWait is how long a request past a cap waits for a slot.
	requestWait time.Duration
}

func (s *Server) bounds() *limits {
	s.limitsOnce.Do(func() {
		s.limits = &limits{timeouts: DefaultTimeouts, requestWait: DefaultRequestSlotWait}
		s.limits.streams = streamSlots{total: DefaultMaxStreams, perClient: DefaultMaxStreamsPerClient, byClient: map[string]int{},
			what: "websocket streams", code: "TooManyStreams"}
		s.limits.requests = streamSlots{total: DefaultMaxRequests, perClient: DefaultMaxRequestsPerClient, byClient: map[string]int{},
			what: "requests", code: "TooManyRequests"}
	})
	return s.limits
}

// hostAllowed reports whether the Host header names this server.
func (l *limits) hostAllowed(hostport string) bool {
	if !l.checkHost || hostport == "" {
		// HTTP/1.0 clients send no Host; a browser always does.
		return true
	}
	host := hostName(hostport)
	return net.ParseIP(host) != nil || host == "localhost" || strings.HasSuffix(host, ".localhost") || l.named(hostport)
}

// hostName is the name in a Host header (host or host:port), lower case,
// without IPv6 brackets or a final dot.
func hostName(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
}

// unsafeMethod is a method that may change something.
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// isUpload is the backing image upload action, whose body is
// multipart/form-data.
func isUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/backingimages/") && r.URL.Query().Get("action") == "upload"
}

// guard refuses, before any handler runs: a Host that does not name this
// server (421); a write from a page of another site (403: a browser sends
// Origin, or Sec-Fetch-Site, with every cross-site POST); a POST or PUT
// to /v1 whose Content-Type is not application/json, even without a body
// (415: an HTML form can only send form or text content types, so no
// cross-site form can detach a volume), unless it has none at all and
// comes from no browser (untypedNonBrowser). The upload action takes
// multipart/form-data, and is left to the Origin check. A page the browser
// vouches is the manager's own or its UI's (ownPage) may send any
// Content-Type: Longhorn's UI posts body-less actions (snapshotPurge,
// snapshotList...) with none, and a form of another site never passes
// ownPage.
func (s *Server) guard(next http.Handler) http.Handler {
	l := s.bounds()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.hostAllowed(r.Host) {
			writeError(w, &httpError{http.StatusMisdirectedRequest, "MisdirectedRequest",
				fmt.Sprintf("Host %q: not a name of this manager; use its IP address, localhost, or a name given to --api-allowed-hosts", r.Host)})
			return
		}
		// Behind the UI's proxy (its nginx, or `longhorn-manager ui`) the
		// browser's Host arrives as X-Forwarded-Host: a page of a rebound
		// name reaching the manager through the proxy is refused too.
		// As for the streams' origins (checkOrigin), only an IP address
		// or a loopback name is safe without being named: a
		// cluster-internal name (longhorn-frontend) is one a tenant's
		// Ingress can serve too.
		if fwd := firstForwarded(r.Header.Get("X-Forwarded-Host")); fwd != "" && l.checkHost && !rebindSafe(fwd) && !l.named(fwd) {
			writeError(w, &httpError{http.StatusMisdirectedRequest, "MisdirectedRequest",
				fmt.Sprintf("X-Forwarded-Host %q (the browser's, through the UI's proxy): not a name of this manager or its UI; use an IP address, localhost, or add the name the UI is served under to --api-allowed-hosts", fwd)})
			return
		}
		if unsafeMethod(r.Method) && s.crossSite(r) {
			writeError(w, &httpError{http.StatusForbidden, "CrossSiteRequest",
				fmt.Sprintf("Origin %q: %s from another site's page is refused", r.Header.Get("Origin"), r.Method)})
			return
		}
		if (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.HasPrefix(r.URL.Path, "/v1/") && !isUpload(r) &&
			!s.ownPage(r) && !untypedNonBrowser(r) {
			ct := r.Header.Get("Content-Type")
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				writeError(w, &httpError{http.StatusUnsupportedMediaType, "UnsupportedMediaType",
					fmt.Sprintf("Content-Type %q: %s needs Content-Type: application/json, even without a body", ct, r.Method)})
				return
			}
		}
		if counted(r) {
			release, err := l.requests.acquireWait(r.Context(), r.RemoteAddr, l.waitFor())
			if err != nil {
				w.Header().Set("Retry-After", "1")
				writeError(w, err)
				return
			}
			defer release()
		}
		next.ServeHTTP(w, r)
	})
}

// counted reports a request the cap on requests at once counts: not a
// websocket stream (capped on its own, and open for as long as it is
// watched) and not a health check (the kubelet's probes must get
// through a flood).
func counted(r *http.Request) bool {
	return !strings.HasPrefix(r.URL.Path, "/v1/ws/") && r.URL.Path != "/healthz" && r.URL.Path != "/readyz"
}

// untypedNonBrowser reports a request with no Content-Type at all from a
// client that is not a browser: Longhorn's python client (longhorn-tests'
// longhorn.py) posts its JSON with none. A browser's form always sends a
// Content-Type, and its other writes carry Origin or Sec-Fetch-Site, so
// this opens nothing to another site's page.
func untypedNonBrowser(r *http.Request) bool {
	_, typed := r.Header["Content-Type"]
	site := r.Header.Get("Sec-Fetch-Site")
	return !typed && r.Header.Get("Origin") == "" && (site == "" || site == "none")
}

// ownPage reports a request a browser says comes from the manager's own
// page or its UI's: a trusted Origin (checkOrigin), or Sec-Fetch-Site
// same-origin. A browser sends Origin with every POST, PUT and DELETE, so
// a cross-site form shows its own; a client that is not a browser sends
// none, and is no cross-site form.
func (s *Server) ownPage(r *http.Request) bool {
	return (r.Header.Get("Origin") != "" && s.checkOrigin(r)) || r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// crossSite reports a request a browser sent from another site's page:
// one it marks cross-site, or whose Origin the websocket streams would
// refuse too (checkOrigin: one rule for writes and streams).
func (s *Server) crossSite(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Site") == "cross-site" || !s.checkOrigin(r)
}

// named reports whether host (host or host:port) is one of the names given
// to --api-allowed-hosts ("*" names none).
func (l *limits) named(hostport string) bool {
	host := hostName(hostport)
	for _, n := range l.hosts {
		if n != "*" && (n == host || (strings.HasPrefix(n, "*.") && strings.HasSuffix(host, n[1:]))) {
			return true
		}
	}
	return false
}

// streamSlots counts what is open at once (websocket streams, or
// requests being served) in all and per client address.
type streamSlots struct {
	mu               sync.Mutex
	total, perClient int
	open             int
	byClient         map[string]int
	// what they are and the error code past a cap, for the 429.
	what, code string
}

// acquire takes a slot for the client at remoteAddr, or says which cap
// is reached (429).
func (c *streamSlots) acquire(remoteAddr string) (release func(), err error) {
	client := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		client = h
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perClient > 0 && c.byClient[client] >= c.perClient {
		return nil, &httpError{http.StatusTooManyRequests, c.code, fmt.Sprintf("at most %d %s at once per client address (%s); wait for one to end first", c.perClient, c.what, client)}
	}
	if c.total > 0 && c.open >= c.total {
		return nil, &httpError{http.StatusTooManyRequests, c.code, fmt.Sprintf("the manager serves at most %d %s at once; try again later", c.total, c.what)}
	}
	c.open++
	c.byClient[client]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.open--
			if c.byClient[client]--; c.byClient[client] <= 0 {
				delete(c.byClient, client)
			}
		})
	}, nil
}

// acquireWait is acquire, trying again until a slot frees, ctx ends or
// wait has passed; the error is the last refusal.
func (c *streamSlots) acquireWait(ctx context.Context, remoteAddr string, wait time.Duration) (func(), error) {
	deadline := time.Now().Add(wait)
	pause := 5 * time.Millisecond
	for {
		release, err := c.acquire(remoteAddr)
		if err == nil || !time.Now().Add(pause).Before(deadline) {
			return release, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

func (l *limits) waitFor() time.Duration {
	l.requests.mu.Lock()
	defer l.requests.mu.Unlock()
	return l.requestWait
}

// uploadDeadlines lifts the server's read and write timeouts from an
// upload: its body may take as long as it needs, as long as bytes keep
// coming, each read pushing the read deadline UploadIdleTimeout on.
type uploadDeadlines struct {
	rc       *http.ResponseController
	idle     time.Duration
	extended time.Time
}

func (s *Server) liftUploadDeadlines(w http.ResponseWriter) *uploadDeadlines {
	u := &uploadDeadlines{rc: http.NewResponseController(w), idle: s.bounds().timeouts.UploadIdleTimeout}
	// An httptest recorder supports neither: nothing to lift then.
	_ = u.rc.SetWriteDeadline(time.Time{})
	u.progress()
	return u
}

// progress moves the read deadline on; called on each read, it does so
// at most once a second.
func (u *uploadDeadlines) progress() {
	if now := time.Now(); now.Sub(u.extended) >= time.Second {
		u.extended = now
		_ = u.rc.SetReadDeadline(now.Add(u.idle))
	}
}

// done restores a write deadline for the answer.
func (u *uploadDeadlines) done(write time.Duration) {
	_ = u.rc.SetWriteDeadline(time.Now().Add(write))
}
