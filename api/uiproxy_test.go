package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
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
// localhost or a name given to --api-allowed-hosts is served; a
// cluster-internal name (one label, or under .svc) is not trusted by
// itself.
func TestRebindingThroughTheUIProxyIsRefused(t *testing.T) {
	s := newTestServer(t)
	s.server.SetAllowedHosts([]string{"longhorn.example.com", "longhorn-frontend.longhorn-system.svc"})
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
		// A cluster-internal name is one a tenant's Ingress can serve
		// too: only a name given to --api-allowed-hosts is trusted.
		{"longhorn-frontend", http.StatusMisdirectedRequest},
		{"longhorn-frontend.other-tenant.svc", http.StatusMisdirectedRequest},
		{"longhorn-frontend.longhorn-system.svc.cluster.local", http.StatusMisdirectedRequest},
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

// testCA is a certificate authority for the authenticating proxy's
// client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxy-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// client is a certificate of the CA named cn, for usage.
func (ca *testCA) client(t *testing.T, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// seen is what a request reached the manager with.
type seen struct {
	auth, user string
	groups     []string
	remote     string
}

// recordingManager stands for the manager and records what reaches it.
func recordingManager(t *testing.T) (*url.URL, func() []seen) {
	var mu sync.Mutex
	var got []seen
	manager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, seen{auth: r.Header.Get("Authorization"), user: r.Header.Get("Impersonate-User"),
			groups: r.Header.Values("Impersonate-Group"), remote: r.Header.Get("X-Remote-User")})
		mu.Unlock()
	}))
	t.Cleanup(manager.Close)
	u, _ := url.Parse(manager.URL)
	return u, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
}

// uiOverTLS serves the UI's proxy as `longhorn-manager ui` does with a
// serving certificate: it asks clients for a certificate and leaves the
// check to UIIdentity.
func uiOverTLS(t *testing.T, h http.Handler) *httptest.Server {
	ui := httptest.NewUnstartedServer(h)
	ui.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	ui.StartTLS()
	t.Cleanup(ui.Close)
	return ui
}

func clientWith(ui *httptest.Server, certs ...tls.Certificate) *http.Client {
	// Client() is one shared client: a copy of it.
	tr := ui.Client().Transport.(*http.Transport).Clone()
	tr.TLSClientConfig.Certificates = certs
	return &http.Client{Transport: tr}
}

// The browser's own token passes through unchanged, and the UI never
// sends its own in its place: a request with no credential reaches the
// manager with none. Identity and impersonation headers a browser (or
// a tenant's pod) sets are removed, never passed on.
func TestUIProxyPassesTheBrowsersTokenAndNoForgedIdentity(t *testing.T) {
	managerURL, take := recordingManager(t)
	ca := newTestCA(t)
	identity := &UIIdentity{ClientCA: ca.pool, Token: func() string { return "ui-token" }}
	ui := uiOverTLS(t, UIProxy(t.TempDir(), managerURL, identity, nil))
	for _, tc := range []struct {
		name    string
		headers map[string]string
		want    seen
	}{
		{"a browser's token", map[string]string{"Authorization": "Bearer user-token"}, seen{auth: "Bearer user-token"}},
		{"a browser's Basic", map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}, seen{auth: "Basic dXNlcjpwYXNz"}},
		{"no credential", nil, seen{}},
		{"a forged identity header", map[string]string{"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}, seen{}},
		{"a forged impersonation", map[string]string{"Authorization": "Bearer user-token", "Impersonate-User": "admin", "Impersonate-Group": "system:masters"},
			seen{auth: "Bearer user-token"}},
	} {
		req, _ := http.NewRequest("GET", ui.URL+"/v1/volumes", nil)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := ui.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := take()
		if len(got) != 1 || got[0].auth != tc.want.auth || got[0].user != "" || len(got[0].groups) != 0 || got[0].remote != "" {
			t.Errorf("%s: the manager saw %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// The identity headers are believed only from the authenticating proxy:
// a client with a certificate the configured CA signed for client
// authentication, of an allowed name. Its user reaches the manager as
// the UI's account impersonating the user and groups; the token is read
// on each request, and without one the UI says so rather than send the
// user on with no credential.
func TestUIProxyBelievesIdentityHeadersOnlyFromTheProxy(t *testing.T) {
	managerURL, take := recordingManager(t)
	ca, other := newTestCA(t), newTestCA(t)
	token := "ui-token-1"
	identity := &UIIdentity{ClientCA: ca.pool, AllowedNames: []string{"front-proxy"}, Token: func() string { return token }}
	ui := uiOverTLS(t, UIProxy(t.TempDir(), managerURL, identity, nil))
	proxy := clientWith(ui, ca.client(t, "front-proxy", x509.ExtKeyUsageClientAuth))
	send := func(c *http.Client, headers ...string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", ui.URL+"/v1/volumes", nil)
		for i := 0; i+1 < len(headers); i += 2 {
			req.Header.Add(headers[i], headers[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	send(proxy, "X-Remote-User", "alice@example.com", "X-Remote-Group", "ops", "X-Remote-Group", "dev", "Authorization", "Bearer id-token")
	if got := take(); len(got) != 1 || got[0].auth != "Bearer ui-token-1" || got[0].user != "alice@example.com" ||
		strings.Join(got[0].groups, ",") != "ops,dev" || got[0].remote != "" {
		t.Errorf("from the proxy: the manager saw %+v", got)
	}
	token = "ui-token-2"
	send(proxy, "X-Remote-User", "bob")
	if got := take(); len(got) != 1 || got[0].auth != "Bearer ui-token-2" || got[0].user != "bob" || len(got[0].groups) != 0 {
		t.Errorf("a rotated token: the manager saw %+v", got)
	}
	// The proxy without a user header: what it sends passes as is.
	send(proxy, "Authorization", "Bearer id-token")
	if got := take(); len(got) != 1 || got[0].auth != "Bearer id-token" || got[0].user != "" {
		t.Errorf("the proxy naming no user: the manager saw %+v", got)
	}

	for name, c := range map[string]*http.Client{
		"no certificate":                 ui.Client(),
		"another CA's certificate":       clientWith(ui, other.client(t, "front-proxy", x509.ExtKeyUsageClientAuth)),
		"a name not allowed":             clientWith(ui, ca.client(t, "tenant", x509.ExtKeyUsageClientAuth)),
		"a certificate for serving only": clientWith(ui, ca.client(t, "front-proxy", x509.ExtKeyUsageServerAuth)),
	} {
		send(c, "X-Remote-User", "admin", "X-Remote-Group", "system:masters")
		if got := take(); len(got) != 1 || got[0].auth != "" || got[0].user != "" || len(got[0].groups) != 0 || got[0].remote != "" {
			t.Errorf("%s: the manager saw %+v, want no identity", name, got)
		}
	}

	token = ""
	if code := send(proxy, "X-Remote-User", "alice@example.com"); code != http.StatusServiceUnavailable {
		t.Errorf("without the UI's token: %d, want 503", code)
	}
	if got := take(); len(got) != 0 {
		t.Errorf("without the UI's token the request reached the manager: %+v", got)
	}
}

// Through the UI to a manager that checks its callers, a request with no
// login of the user's is a 401 that says to log in, forged identity
// headers or not: the UI never serves it as its own account. The user's
// own token is the user's.
func TestUIProxyRequestWithoutLoginIsRefused(t *testing.T) {
	s := newTestServer(t)
	f := &fakeReviews{allow: func(a *authorizationv1.ResourceAttributes) bool { return a.Verb == "list" }}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	manager := s.live(t, Timeouts{})
	managerURL, _ := url.Parse(manager.URL)
	ca := newTestCA(t)
	ui := uiOverTLS(t, UIProxy(t.TempDir(), managerURL, &UIIdentity{ClientCA: ca.pool, Token: func() string { return "good" }}, nil))
	for _, tc := range []struct {
		name    string
		headers []string
		code    int
		says    string
	}{
		{"no credential", nil, http.StatusUnauthorized, "not logged in"},
		{"a forged identity header", []string{"X-Remote-User", "alice"}, http.StatusUnauthorized, "not logged in"},
		{"the user's own token", []string{"Authorization", "Bearer good"}, http.StatusOK, ""},
	} {
		req, _ := http.NewRequest("GET", ui.URL+"/v1/volumes", nil)
		for i := 0; i+1 < len(tc.headers); i += 2 {
			req.Header.Set(tc.headers[i], tc.headers[i+1])
		}
		resp, err := ui.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.says) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.name, resp.StatusCode, body, tc.code, tc.says)
		}
	}
}
