package app

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestProfilerServesOnlyOnLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:6060", ":6060", "10.0.0.5:6060", "[::]:6060", "example.com:6060", "6060"} {
		err := checkProfilerAddress(addr)
		if err == nil {
			t.Errorf("%q accepted", addr)
		} else if !strings.Contains(err.Error(), "--profiler-address") {
			t.Errorf("%q: the error does not name the flag: %v", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:6060", "localhost:6060", "127.0.0.2:6060"} {
		if err := checkProfilerAddress(addr); err != nil {
			t.Errorf("%q refused: %v", addr, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := startProfiler(ctx, logrus.NewEntry(logrus.New()), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.200s", resp.StatusCode, body)
	}
}
