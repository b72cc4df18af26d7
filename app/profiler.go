package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/sirupsen/logrus"
)

// startProfiler serves Go's runtime profiles (net/http/pprof: heap, CPU,
// goroutines, ...) on addr, for an operator on the node to see where the
// manager's memory and processor time go. They carry no volume data, but
// they do show the process's command line and stacks, and they have no
// authentication, so addr must be a loopback address
// (`kubectl port-forward` reaches it). It stops when ctx ends.
func startProfiler(ctx context.Context, log *logrus.Entry, addr string) (net.Addr, error) {
	if err := checkProfilerAddress(addr); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--profiler-address %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Warn("The profiler stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.WithField("address", ln.Addr().String()).Info("Serving Go runtime profiles on /debug/pprof/")
	return ln.Addr(), nil
}

// checkProfilerAddress accepts host:port where host is a loopback IP
// address or localhost.
func checkProfilerAddress(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--profiler-address %q: want host:port: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return fmt.Errorf("--profiler-address %q: the profiles have no authentication, so the host must be a loopback address (127.0.0.1, ::1 or localhost)", addr)
	}
	return nil
}
