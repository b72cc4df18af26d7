package api

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// UIProxy serves Longhorn's web UI (a built longhorn-ui dist folder) and
// proxies /v1, websockets included, to the manager at managerURL, as the
// UI image's nginx does: the Host header that reaches the manager is the
// manager's, X-Forwarded-Host is the browser's, any other path that is
// not a file of dist answers index.html, and a method other than GET or
// HEAD outside /v1 is a 405.
//
// token, when not nil, is the UI's own identity under the manager's
// --api-auth=kubernetes: each request to the manager carries its bearer
// token in place of any Authorization the browser sent, so what the UI's
// users may do is what the administrator granted the UI's account, and a
// caller cannot pass a token of its own through the UI. With token nil
// the browser's Authorization passes unchanged, as through nginx.
// transport reaches the manager (nil: http.DefaultTransport); a manager
// serving TLS (--api-tls) is reached with one that checks its certificate.
func UIProxy(dist string, managerURL *url.URL, token func() string, transport http.RoundTripper) http.Handler {
	proxy := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(managerURL)
			r.Out.Header.Set("X-Forwarded-Host", r.In.Host)
			r.SetXForwarded()
			if token != nil {
				r.Out.Header.Del("Authorization")
				if t := token(); t != "" {
					r.Out.Header.Set("Authorization", "Bearer "+t)
				}
			}
		},
		// Streams send as they change: no buffering.
		FlushInterval: -1,
	}
	files := http.FileServer(http.Dir(dist))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1" || strings.HasPrefix(r.URL.Path, "/v1/") {
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
