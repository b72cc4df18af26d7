// Package api is the manager's HTTP interface on port 9500, in the shape
// of Longhorn's /v1 API: resources with id, type, links and actions,
// collections, errors that name the field, schemas for generic clients,
// websocket streams, health probes and Prometheus metrics.
package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// Readiness reports whether the manager is ready to serve, and if not, why.
type Readiness func() (ready bool, reason string)

// Server holds what the handlers need.
type Server struct {
	ds       *datastore.DataStore
	vm       *manager.VolumeManager
	clock    clock.Clock
	logger   *logrus.Entry
	streams  *streams
	metrics  *requestMetrics
	registry *prometheus.Registry
	// uploadWait bounds the wait for a new upload image's data source.
	uploadWait time.Duration
	// auth, when set, checks each caller with the apiserver (auth.go).
	auth *kubeAuth
	// limits bound what callers send (limits.go).
	limitsOnce sync.Once
	limits     *limits
	// allowedOrigins are browser origins trusted to open streams besides
	// the manager's own address; see checkOrigin.
	allowedOrigins map[string]bool
	// internalTLS is what engines and data sources are called with;
	// engineConns the engines' connections, one per node (Close).
	internalTLS *mtls.Identity
	engineConns *engineapi.Conns
	// managerUser is the manager's own account, as the apiserver knows
	// it: who asks for a system restore when the API checks no callers.
	managerUser string
	// engineImage is the manager's image: the default engine image.
	engineImage string
}

// NewServer returns the API on the datastore. Its websocket streams listen
// to the informers, which must be the ones the datastore reads.
func NewServer(logger *logrus.Entry, ds *datastore.DataStore, inf datastore.Informers, vm *manager.VolumeManager, clk clock.Clock, registry *prometheus.Registry) *Server {
	s := &Server{ds: ds, vm: vm, clock: clk, logger: logger, registry: registry, metrics: newRequestMetrics(registry), uploadWait: defaultUploadWait,
		managerUser: rights.ServiceAccountUser(ds.Namespace(), DefaultManagerServiceAccount)}
	s.streams = newStreams(s, inf)
	return s
}

// SetInternalTLS sets the identity the API calls engines (snapshot
// actions) and data sources (uploads) with. The engines are called over
// one connection per node, kept until Close.
func (s *Server) SetInternalTLS(id *mtls.Identity) {
	s.internalTLS = id
	s.engineConns = engineapi.NewConns(id)
}

// DefaultManagerServiceAccount is the manager's account unless
// SetManagerServiceAccount names another (--service-account).
const DefaultManagerServiceAccount = "longhorn-service-account"

// SetManagerServiceAccount names the ServiceAccount the manager runs as,
// in its namespace.
func (s *Server) SetManagerServiceAccount(name string) {
	s.managerUser = rights.ServiceAccountUser(s.ds.Namespace(), name)
}

// Close closes the connections the API keeps to the engines.
func (s *Server) Close() {
	if s.engineConns != nil {
		s.engineConns.Close()
	}
}

// handlerFunc is a handler that returns its error for writeError.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// Router returns the HTTP handler. ready answers /readyz; the /v1 routes
// need the informer caches synced, which the daemon waits for first.
func (s *Server) Router(ready Readiness) http.Handler {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, notFound("no such path: %s", req.URL.Path))
	})
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, &httpError{http.StatusMethodNotAllowed, "MethodNotAllowed", req.Method + " is not allowed on " + req.URL.Path})
	})
	// Until the caches are synced the /v1 routes would answer from empty
	// lists: they answer 503 instead.
	whenReady := func(h handlerFunc) handlerFunc {
		return func(w http.ResponseWriter, req *http.Request) error {
			if ok, reason := ready(); !ok {
				return &httpError{http.StatusServiceUnavailable, "NotReady", "the manager is starting: " + reason}
			}
			return h(w, req)
		}
	}
	handle := func(path, method, route string, h handlerFunc) {
		r.Handle(path, s.metrics.instrument(route, s.wrap(s.authorize(route, whenReady(h))))).Methods(method)
	}
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
	r.Handle("/metrics", s.authorizePath("/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}))).Methods(http.MethodGet)

	handle("/v1", http.MethodGet, "root", s.root)
	handle("/v1/schemas", http.MethodGet, "schemas", s.listSchemas)
	handle("/v1/schemas/{type}", http.MethodGet, "schema", s.getSchema)

	handle("/v1/recurringjobs", http.MethodGet, "recurringjobs.list", s.listRecurringJobs)
	handle("/v1/recurringjobs", http.MethodPost, "recurringjobs.create", s.createRecurringJob)
	handle("/v1/recurringjobs/{name}", http.MethodGet, "recurringjobs.get", s.getRecurringJob)
	handle("/v1/recurringjobs/{name}", http.MethodPut, "recurringjobs.update", s.updateRecurringJob)
	handle("/v1/recurringjobs/{name}", http.MethodDelete, "recurringjobs.delete", s.deleteRecurringJob)

	handle("/v1/volumes", http.MethodGet, "volumes.list", s.listVolumes)
	handle("/v1/volumes", http.MethodPost, "volumes.create", s.createVolume)
	handle("/v1/volumes/{name}", http.MethodGet, "volumes.get", s.getVolume)
	handle("/v1/volumes/{name}", http.MethodDelete, "volumes.delete", s.deleteVolume)
	handle("/v1/volumes/{name}", http.MethodPost, "volumes.action", s.volumeAction)

	handle("/v1/settings", http.MethodGet, "settings.list", s.listSettings)
	handle("/v1/settings/{name}", http.MethodGet, "settings.get", s.getSetting)
	handle("/v1/settings/{name}", http.MethodPut, "settings.update", s.updateSetting)

	handle("/v1/backupvolumes", http.MethodGet, "backupvolumes.list", s.listBackupVolumes)
	handle("/v1/backupvolumes/{name}", http.MethodGet, "backupvolumes.get", s.getBackupVolume)
	handle("/v1/backupvolumes/{name}", http.MethodPost, "backupvolumes.action", s.backupVolumeAction)
	handle("/v1/backupvolumes/{name}", http.MethodDelete, "backupvolumes.delete", s.deleteBackupVolume)

	handle("/v1/nodes", http.MethodGet, "nodes.list", s.listNodes)
	handle("/v1/nodes/{name}", http.MethodGet, "nodes.get", s.getNode)

	handle("/v1/backingimages", http.MethodGet, "backingimages.list", s.listBackingImages)
	handle("/v1/backingimages", http.MethodPost, "backingimages.create", s.createBackingImage)
	handle("/v1/backingimages/{name}", http.MethodGet, "backingimages.get", s.getBackingImage)
	handle("/v1/backingimages/{name}", http.MethodDelete, "backingimages.delete", s.deleteBackingImage)
	handle("/v1/backingimages/{name}", http.MethodPost, "backingimages.action", s.backingImageAction)

	// What Longhorn's UI reads besides the project's resources.
	handle("/v1/events", http.MethodGet, "events.list", s.listEvents)
	handle("/v1/backuptargets", http.MethodGet, "backuptargets.list", s.listBackupTargets)
	handle("/v1/backuptargets", http.MethodPost, "backuptargets.create", s.createBackupTarget)
	handle("/v1/volumeattachments", http.MethodGet, "volumeattachments.list", s.listVolumeAttachments)
	handle("/v1/volumeattachments/{name}", http.MethodGet, "volumeattachments.get", s.getVolumeAttachment)
	handle("/v1/backuptargets/{name}", http.MethodGet, "backuptargets.get", s.getBackupTarget)
	handle("/v1/backuptargets/{name}", http.MethodPut, "backuptargets.update", s.updateBackupTarget)
	handle("/v1/backuptargets/{name}", http.MethodPost, "backuptargets.action", s.backupTargetAction)
	handle("/v1/backuptargets/{name}", http.MethodDelete, "backuptargets.delete", s.deleteBackupTarget)
	handle("/v1/systembackups", http.MethodGet, "systembackups.list", s.listSystemBackups)
	handle("/v1/systembackups", http.MethodPost, "systembackups.create", s.createSystemBackup)
	handle("/v1/systembackups/{name}", http.MethodGet, "systembackups.get", s.getSystemBackup)
	handle("/v1/systembackups/{name}", http.MethodDelete, "systembackups.delete", s.deleteSystemBackup)
	handle("/v1/systemrestores", http.MethodGet, "systemrestores.list", s.listSystemRestores)
	handle("/v1/systemrestores", http.MethodPost, "systemrestores.create", s.createSystemRestore)
	handle("/v1/systemrestores/{name}", http.MethodGet, "systemrestores.get", s.getSystemRestore)
	handle("/v1/systemrestores/{name}", http.MethodDelete, "systemrestores.delete", s.deleteSystemRestore)
	handle("/v1/engineimages", http.MethodGet, "engineimages.list", s.listEngineImages)
	handle("/v1/engineimages/{name}", http.MethodGet, "engineimages.get", s.getEngineImage)
	handle("/v1/instancemanagers", http.MethodGet, "instancemanagers.list", s.listInstanceManagers)
	handle("/v1/instancemanagers/{name}", http.MethodGet, "instancemanagers.get", s.getInstanceManager)
	handle("/v1/nodetags", http.MethodGet, "tags.list", s.listTags)
	handle("/v1/disktags", http.MethodGet, "tags.list", s.listTags)
	for path := range emptyKinds {
		handle("/v1/"+path, http.MethodGet, path+".list", s.listEmpty(path))
	}

	handle("/v1/ws/{resource}", http.MethodGet, "ws", s.serveStream)
	handle("/v1/ws/{period}/{resource}", http.MethodGet, "ws", s.serveStream)

	return logRequests(s.logger, s.guard(r))
}

// wrap turns a handlerFunc into a handler: errors become JSON error
// bodies, and a panic becomes a 500 with the stack in the log, never a
// dropped connection.
func (s *Server) wrap(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				s.logger.WithFields(logrus.Fields{"method": r.Method, "path": r.URL.Path, "panic": p}).Errorf("Handler panicked\n%s", debug.Stack())
				writeError(w, &httpError{http.StatusInternalServerError, "ServerError", "internal error"})
			}
		}()
		if err := h(w, r); err != nil {
			writeError(w, err)
		}
	})
}

func (s *Server) root(w http.ResponseWriter, r *http.Request) error {
	base := baseURL(r)
	w.Header().Set("X-API-Schemas", base+"/v1/schemas")
	links := map[string]string{"self": base + "/v1", "schemas": base + "/v1/schemas"}
	for _, c := range []string{"recurringjobs", "volumes", "settings", "nodes", "backupvolumes", "backingimages", "events", "backuptargets", "volumeattachments", "systembackups", "systemrestores"} {
		links[c] = base + "/v1/" + c
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": "v1", "type": "apiRoot", "links": links})
	return nil
}

// baseURL is the address links point at: the one the client asked for.
// Behind a proxy such as the Longhorn UI's nginx that is X-Forwarded-Host
// (and X-Forwarded-Proto), as in Longhorn's API, whose UI follows the
// links and actions it is given.
func baseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := firstForwarded(r.Header.Get("X-Forwarded-Proto")); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if h := firstForwarded(r.Header.Get("X-Forwarded-Host")); h != "" && !strings.ContainsAny(h, "/\\ @?#") {
		host = h
	}
	return scheme + "://" + host
}

// firstForwarded is the first of a proxy chain's comma-separated values.
func firstForwarded(v string) string {
	return strings.TrimSpace(strings.Split(v, ",")[0])
}

func collection(base, resourceType, path string, data any) Collection {
	return Collection{Type: "collection", ResourceType: resourceType, Links: map[string]string{"self": base + "/v1/" + path}, Data: data}
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// statusRecorder remembers the status code for logs and metrics. It passes
// Hijack through, so a websocket upgrade works behind it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap and Hijack let the websocket upgrade reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return hijack(s.ResponseWriter)
}

// logRequests logs every request at debug level, and failed ones at warn.
func logRequests(logger *logrus.Entry, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		entry := logger.WithFields(logrus.Fields{
			"method": r.Method, "path": r.URL.Path, "status": rec.status, "duration": time.Since(start).Round(time.Microsecond),
			"client": r.RemoteAddr,
		})
		switch {
		case rec.status >= 500:
			entry.Warn("Request failed")
		case rec.status >= 400:
			entry.Info("Request refused")
		default:
			entry.Debug("Request served")
		}
	})
}

func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be taken over")
	}
	return h.Hijack()
}

// MetricsOnly serves the metrics, GET /metrics, and nothing else: the
// handler of --metrics-address, a port of its own that a NetworkPolicy
// can open to the scraper without opening the API to it. The metrics are
// read-only and hold no secret; whoever may reach the port reads them.
func (s *Server) MetricsOnly() http.Handler {
	metrics := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/metrics":
			writeError(w, notFound("only /metrics is served on this port; the API is on its own"))
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			writeError(w, &httpError{http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method + " is not allowed on /metrics"})
		default:
			metrics.ServeHTTP(w, r)
		}
	})
}
