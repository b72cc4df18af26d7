// Package liveness serves the CSI driver's liveness endpoint, as
// Kubernetes' livenessprobe sidecar does, from the driver's own process:
// the sidecar's module is not served where this project builds its
// images. GET /healthz calls the driver's Probe over its own socket, as
// the kubelet and the sidecars reach it, so a driver whose socket was
// removed or whose gRPC server no longer answers fails its container's
// livenessProbe and is restarted.
package liveness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/csi"
)

// DefaultProbeTimeout bounds the Probe one /healthz makes: below the
// kubelet probe's timeoutSeconds (4 in package/), so the answer says why.
const DefaultProbeTimeout = 3 * time.Second

// Handler answers /healthz for the driver serving endpoint
// (unix:///path/csi.sock).
type Handler struct {
	// Endpoint is the driver's socket.
	Endpoint string
	// ProbeTimeout bounds each Probe; DefaultProbeTimeout when zero.
	ProbeTimeout time.Duration
	// Log is where failed checks are logged.
	Log *logrus.Entry
}

// ServeHTTP answers 200 when the driver answers its Probe and 500, with
// the reason, when it does not. A driver that answers "not ready" (it
// cannot reach the manager's API) is alive: restarting it would not bring
// the manager back, and a restart of the Node service's container stops
// the nbdfuse of every volume staged on the node. Unlike the livenessprobe
// sidecar, which fails a driver that is not ready, it answers 200 and
// says so.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/healthz" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	timeout := h.ProbeTimeout
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	ready, err := csi.ProbeSocket(ctx, h.Endpoint)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	switch {
	case err != nil:
		// gRPC's own timer for the deadline may fire an instant before
		// the context's: its status says so then.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
			err = fmt.Errorf("%s did not answer its Probe within %s: %w", csi.DriverName, timeout, err)
		}
		h.log().WithError(err).WithField("endpoint", h.Endpoint).Warn("Liveness check failed: the CSI driver does not answer on its socket")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%v\n", err)
	case !ready:
		fmt.Fprintf(w, "ok: %s answers, not ready: it cannot reach the manager's API\n", csi.DriverName)
	default:
		fmt.Fprintln(w, "ok")
	}
}

func (h *Handler) log() *logrus.Entry {
	if h.Log != nil {
		return h.Log
	}
	return logrus.WithField("component", "csi-liveness")
}

// Serve serves h on addr (host:port) until ctx ends.
func Serve(ctx context.Context, addr string, h *Handler) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for the liveness endpoint on %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      h.ProbeTimeout + 10*time.Second,
		IdleTimeout:       time.Minute,
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	h.log().WithFields(logrus.Fields{"address": l.Addr().String(), "endpoint": h.Endpoint}).Info("Serving the CSI driver's liveness endpoint, /healthz")
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve the liveness endpoint on %s: %w", addr, err)
	}
	return nil
}
