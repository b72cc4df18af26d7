package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics counts API requests and their latencies by route.
type requestMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newRequestMetrics(registry prometheus.Registerer) *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_manager_api_requests_total",
			Help: "API requests by route, method and status code.",
		}, []string{"route", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "longhorn_manager_api_request_duration_seconds",
			Help:    "API request latency by route and method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"route", "method"}),
	}
	registry.MustRegister(m.requests, m.latency)
	return m
}

func (m *requestMetrics) instrument(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		m.requests.WithLabelValues(route, r.Method, strconv.Itoa(rec.status)).Inc()
		m.latency.WithLabelValues(route, r.Method).Observe(time.Since(start).Seconds())
	})
}
