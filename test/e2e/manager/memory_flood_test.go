//go:build e2e

package manager

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// measuredScalePeakMiB is the manager's highest peak RSS measured at
// scale (1,000 volumes × 30 snapshots at start-up, their engines
// included; 10,000 jobs and 100 streams peak lower), from the dated
// tables of docs/benchmarks.md.
const measuredScalePeakMiB = 249

// The manager under a flood of large bodies and streams stays within the
// memory package/ gives it, and keeps serving (issue: no cap on requests,
// a 1 MiB body allocated 45 MB, each stream kept a copy of its list, and
// the pod had no limit, so an out-of-memory kill would stop every
// attached volume of the node): from eight loopback addresses, 100
// websocket streams and 256 requests at once, each with a body of 1 MiB
// (values past the count limit, or one long string), 2,000 in all; the
// daemon's peak RSS above its idle one, added to the measured peak at
// scale, must fit the DaemonSet's memory limit, and its request must
// cover that peak.
func TestAFloodOfBodiesAndStreamsStaysWithinTheMemoryLimit(t *testing.T) {
	limit, request, goMemLimit := managerMemory(t)
	if request < measuredScalePeakMiB {
		t.Errorf("the manager's memory request, %d MiB, is below its measured peak at scale, %d MiB", request, measuredScalePeakMiB)
	}
	if goMemLimit == "" {
		t.Error("the manager has no GOMEMLIMIT: its collector does not know the container's limit")
	} else if q, err := resource.ParseQuantity(strings.TrimSuffix(goMemLimit, "B")); err != nil || q.Value()>>20 >= limit {
		t.Errorf("GOMEMLIMIT %s is not below the %d MiB limit (%v)", goMemLimit, limit, err)
	}
	// The daemon runs with the collector's setting as deployed.
	t.Setenv("GOMEMLIMIT", goMemLimit)
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	framework.InstallRBAC(t, cluster.KubeClient(t), ns)
	d := framework.StartDaemonProcess(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns)
	time.Sleep(2 * time.Second)
	idle := d.ProcStatus(t, "VmRSS") / 1024

	// Clients from several loopback addresses, as several callers: each
	// address has caps of its own.
	from := func(i int) *net.Dialer {
		return &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%8))}, Timeout: 10 * time.Second}
	}
	var streams []*websocket.Conn
	t.Cleanup(func() {
		for _, c := range streams {
			c.Close()
		}
	})
	for i := 0; i < 100; i++ {
		dialer := websocket.Dialer{NetDial: from(i).Dial, HandshakeTimeout: 10 * time.Second}
		c, _, err := dialer.Dial("ws://"+d.API+"/v1/ws/volumes", nil)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		streams = append(streams, c)
	}

	manyValues := []byte(`{"name":"flood","size":"1Mi","recurringJobSelector":[` + strings.Repeat(`{},`, 349_524) + `{}]}`)
	longString := []byte(`{"name":"` + strings.Repeat("a", 1<<20-32) + `","size":"1Mi"}`)
	clients := make([]*http.Client, 8)
	for i := range clients {
		clients[i] = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: from(i).DialContext, MaxIdleConnsPerHost: 64}}
	}
	var codes sync.Map
	var sent atomic.Int64
	var healthy, unhealthy atomic.Int64
	stop := make(chan struct{})
	var health sync.WaitGroup
	health.Add(1)
	go func() {
		defer health.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			resp, err := http.Get("http://" + d.API + "/healthz")
			if err == nil && resp.StatusCode == http.StatusOK {
				healthy.Add(1)
			} else {
				unhealthy.Add(1)
			}
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	var wg sync.WaitGroup
	for w := 0; w < 256; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for sent.Add(1) <= 2000 {
				body := manyValues
				if w%2 == 1 {
					body = longString
				}
				req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+d.API+"/v1/volumes", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				resp, err := clients[w%8].Do(req)
				code := 0
				if err == nil {
					code = resp.StatusCode
					resp.Body.Close()
				}
				n, _ := codes.LoadOrStore(code, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	health.Wait()
	peak := d.ProcStatus(t, "VmHWM") / 1024
	summary := map[int]int64{}
	codes.Range(func(k, v any) bool { summary[k.(int)] = v.(*atomic.Int64).Load(); return true })
	t.Logf("idle RSS %.0f MiB, peak RSS under the flood %.0f MiB; answers %v; /healthz %d ok, %d not", idle, peak, summary, healthy.Load(), unhealthy.Load())

	if summary[0] > 0 || summary[http.StatusOK] > 0 {
		t.Errorf("answers %v: a request failed to connect or a flood body made a volume", summary)
	}
	if unhealthy.Load() > 0 {
		t.Errorf("/healthz failed %d times during the flood", unhealthy.Load())
	}
	if cost := peak - idle; float64(measuredScalePeakMiB)+cost > float64(limit) {
		t.Errorf("the flood cost %.0f MiB above idle: with the measured %d MiB at scale, past the %d MiB limit", cost, measuredScalePeakMiB, limit)
	}
	// Serving after it: an API call and every stream still open.
	resp, err := http.Get("http://" + d.API + "/v1/volumes")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/volumes after the flood: %v %v", resp, err)
	}
	resp.Body.Close()
	for i, c := range streams {
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, _, err := c.ReadMessage(); err != nil && !isTimeout(err) {
			t.Errorf("stream %d closed by the flood: %v", i, err)
			break
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// managerMemory reads the manager container's memory limit and request
// from package/longhorn-manager.yaml, in MiB, and its GOMEMLIMIT.
func managerMemory(t *testing.T) (limit, request int64, goMemLimit string) {
	for _, obj := range framework.ReadManifests(t, "longhorn-manager.yaml") {
		ds, ok := obj.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			if c.Name != "longhorn-manager" {
				continue
			}
			l, r := c.Resources.Limits.Memory(), c.Resources.Requests.Memory()
			if l.IsZero() || r.IsZero() {
				t.Fatalf("the manager container has no memory limit or request: %+v", c.Resources)
			}
			for _, e := range c.Env {
				if e.Name == "GOMEMLIMIT" {
					goMemLimit = e.Value
				}
			}
			return l.Value() >> 20, r.Value() >> 20, goMemLimit
		}
	}
	t.Fatal("no longhorn-manager container in package/longhorn-manager.yaml")
	return 0, 0, ""
}
