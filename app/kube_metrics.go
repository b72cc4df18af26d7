package app

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// countKubeRequests returns a copy of cfg whose clients count every
// request they send to the apiserver in
// longhorn_manager_kube_api_requests_total, by HTTP method, resource and
// response code, so writes (anything but GET) can be watched per
// resource, and those refused (409: written on a stale copy) told apart.
func countKubeRequests(cfg *rest.Config, registry prometheus.Registerer) *rest.Config {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "longhorn_manager_kube_api_requests_total",
		Help: "Requests sent to the Kubernetes API, by HTTP method, resource and response code (watches and lists are GETs; \"error\" when no response came).",
	}, []string{"method", "resource", "code"})
	registry.MustRegister(requests)
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			code := "error"
			if err == nil {
				code = strconv.Itoa(resp.StatusCode)
			}
			requests.WithLabelValues(req.Method, apiResource(req.URL.Path), code).Inc()
			return resp, err
		})
	})
	return counted
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// apiResource names the resource of an API path, with its subresource:
// /apis/longhorn.io/v1beta2/namespaces/ns/snapshots/s/status is
// "snapshots/status", /api/v1/namespaces/ns is "namespaces".
func apiResource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return "other"
	case 1, 2:
		return parts[0]
	}
	return parts[0] + "/" + parts[2]
}
