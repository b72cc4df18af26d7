package api

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"
)

// UIProxy serves Longhorn's web UI (a built longhorn-ui dist folder) and
// proxies /v1, websockets included, to the manager at managerURL, as the
// UI image's nginx does: the Host header that reaches the manager is the
// manager's, X-Forwarded-Host is the browser's, any other path that is
// not a file of dist answers index.html, and a method other than GET or
// HEAD outside /v1 is a 405.
//
// The UI authenticates nobody itself, and lends nobody its own account.
// The browser's Authorization passes unchanged: behind a login that sets
// a bearer token (oauth2-proxy passing the user's ID token), the manager's
// --api-auth=kubernetes checks that token and its user's RBAC. identity,
// when not nil, also believes the user named by an authenticating proxy's
// identity headers, from a client that proves it is that proxy (see
// UIIdentity). A request with neither reaches the manager with no
// credential, which refuses it (401) when it checks its callers.
// transport reaches the manager (nil: http.DefaultTransport); a manager
// serving TLS (--api-tls) is reached with one that checks its certificate.
func UIProxy(dist string, managerURL *url.URL, identity *UIIdentity, transport http.RoundTripper) http.Handler {
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(managerURL)
			r.Out.Header.Set("X-Forwarded-Host", r.In.Host)
			r.SetXForwarded()
			// Who the user is comes from the proxy's checked headers or
			// the user's own token, never from headers a browser sets.
			identity.strip(r.Out.Header)
			if user, groups, ok := identity.vouched(r.In); ok {
				r.Out.Header.Set("Authorization", "Bearer "+identity.token())
				r.Out.Header.Set(impersonateUserHeader, user)
				for _, g := range groups {
					r.Out.Header.Add(impersonateGroupHeader, g)
				}
			}
		},
		// Streams send as they change: no buffering.
		FlushInterval: -1,
	}
	files := http.FileServer(http.Dir(dist))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
			if err := identity.usable(r); err != nil {
				writeError(w, err)
				return
			}
			proxy.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// nginx serves files to GET and HEAD only; a 200 with
			// index.html would read as success to the UI's axios.
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		clean := filepath.FromSlash(filepath.Clean("/" + r.URL.Path))
		if st, err := os.Stat(filepath.Join(dist, clean)); err != nil || st.IsDir() {
			r = r.Clone(r.Context())
			r.URL.Path = "/"
		}
		w.Header().Set("Cache-Control", "max-age=0")
		files.ServeHTTP(w, r)
	})
}

// token is the UI's own token; "" when it has none.
func (id *UIIdentity) token() string {
	if id == nil || id.Token == nil {
		return ""
	}
	return id.Token()
}

// usable refuses a request vouched for by the authenticating proxy when
// the UI has no token of its own to send it with (its token file is
// missing or empty): without it the manager would answer that the user
// sent no credential, which is not so.
func (id *UIIdentity) usable(r *http.Request) error {
	if _, _, ok := id.vouched(r); ok && id.token() == "" {
		logrus.WithField("path", r.URL.Path).Warn("The UI's own token (--token-file) is missing or empty: a user the authenticating proxy named cannot be passed on")
		return &httpError{http.StatusServiceUnavailable, "UITokenUnavailable",
			"the UI's own token (--token-file) cannot be read now, so the user your login names cannot be passed to the manager: retry later"}
	}
	return nil
}
