//go:build e2e

package api

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestATokenFloodLeavesTheHeartbeatAlone: with --api-auth=kubernetes, a
// flood of requests each with a new bad token (as anyone who reaches the
// port can send) is answered 401 or 429 with no 5xx, while the node's
// heartbeat Lease goes on being renewed every period (the node never
// comes near going stale) and a caller from another address with a new
// valid token is checked and served. The reviews have their own client
// and budget, and each caller's address a budget within it; the
// heartbeat's client is not theirs.
func TestATokenFloodLeavesTheHeartbeatAlone(t *testing.T) {
	t.Parallel()
	e, d := framework.KubernetesAuthAPIEnv(t)
	token := serviceAccountToken(t, e.Kube, e.NS, "reader")
	ctx := context.Background()
	renewals := func() (time.Time, error) {
		lease, err := e.Kube.CoordinationV1().Leases(e.NS).Get(ctx, datastore.HeartbeatLeaseName("node-1"), metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil {
			return time.Time{}, err
		}
		return lease.Spec.RenewTime.Time, nil
	}
	first, err := renewals()
	if err != nil {
		t.Fatal(err)
	}

	// Three heartbeat periods of flood: 8 callers, each a request every
	// 2 ms or as fast as answered (some 4,000 new tokens a second, 200
	// times the review budget, without taking the machine's cores from
	// the tests beside it).
	floodCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var sent, limited atomic.Int64
	var unexpected atomic.Value
	client := &http.Client{Timeout: 10 * time.Second}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; floodCtx.Err() == nil; i++ {
				time.Sleep(2 * time.Millisecond)
				req, _ := http.NewRequestWithContext(floodCtx, "GET", "http://"+d.APIAddress+"/v1/volumes", nil)
				req.Header.Set("Authorization", fmt.Sprintf("Bearer flood-%d-%d", w, i))
				resp, err := client.Do(req)
				if err != nil {
					continue // the flood's own end
				}
				resp.Body.Close()
				sent.Add(1)
				switch resp.StatusCode {
				case http.StatusUnauthorized:
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					unexpected.Store(resp.StatusCode)
				}
			}
		}(w)
	}
	// During the flood: the Lease is renewed again and again, and a
	// known caller is served.
	var seen []time.Time
	last := first
	framework.Eventually(t, 60*time.Second, "three heartbeat renewals during the flood", func() (bool, error) {
		at, err := renewals()
		if err != nil {
			return false, err
		}
		if at.After(last) {
			seen = append(seen, at)
			last = at
		}
		return len(seen) >= 3, nil
	})
	// The known caller comes from another address (127.0.0.2): the
	// flood spends its own address's budget, not the others'.
	other := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).DialContext}}
	req, _ := http.NewRequest("GET", "http://"+d.APIAddress+"/v1/volumes", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := other.Do(req)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatalf("a known caller during the flood: %v", err)
	}
	resp.Body.Close()
	// The reader is bound to nothing: 403 says its token was checked.
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a known caller during the flood: %d, want 403 (authenticated, not authorized)", resp.StatusCode)
	}
	if code := unexpected.Load(); code != nil {
		t.Errorf("the flood got a %d; want only 401 and 429", code)
	}
	if limited.Load() == 0 {
		t.Errorf("%d flood requests, none limited", sent.Load())
	}
	t.Logf("%d flood requests, %d answered 429; the Lease renewed at %v", sent.Load(), limited.Load(), seen)
}

// TestMetricsOnTheirOwnPort: --metrics-address serves /metrics alone, with
// no token even when the API needs one (the port is what a NetworkPolicy
// opens to the scraper), and no API path: the API stays behind its own
// port and authentication.
func TestMetricsOnTheirOwnPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, d := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) { o.MetricsAddress = addr })
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("http://" + addr + "/metrics"); code != http.StatusOK || !strings.Contains(body, "longhorn_") {
		t.Errorf("metrics port /metrics: %d, %.200s", code, body)
	}
	for _, path := range []string{"/v1/volumes", "/v1", "/", "/healthz"} {
		if code, _ := get("http://" + addr + path); code != http.StatusNotFound {
			t.Errorf("metrics port %s: %d, want 404", path, code)
		}
	}
	if code, _ := get("http://" + d.APIAddress + "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("the API's /metrics without a token: %d, want 401", code)
	}
}
