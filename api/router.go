// Package api is the manager's HTTP interface on port 9500: health and
// readiness probes now, the /v1 REST and websocket API later.
package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/mux"
	"github.com/sirupsen/logrus"
)

// Readiness reports whether the manager is ready to serve, and if not, why.
type Readiness func() (ready bool, reason string)

// NewRouter returns the manager's HTTP handler.
func NewRouter(logger *logrus.Entry, ready Readiness) http.Handler {
	r := mux.NewRouter()
	r.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}).Methods(http.MethodGet)
	r.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ok, reason := ready(); !ok {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": reason})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	}).Methods(http.MethodGet)
	return logRequests(logger, r)
}

func writeJSON(w http.ResponseWriter, status int, body interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// logRequests logs every request at debug level, and failed ones at warn.
func logRequests(logger *logrus.Entry, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		entry := logger.WithFields(logrus.Fields{
			"method": r.Method, "path": r.URL.Path, "status": rec.status, "duration": time.Since(start).Round(time.Microsecond),
		})
		if rec.status >= 500 {
			entry.Warn("Request failed")
		} else {
			entry.Debug("Request served")
		}
	})
}
