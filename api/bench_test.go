package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// reportLatency adds req/s and the 99th percentile to a benchmark.
func reportLatency(b *testing.B, durations []time.Duration, total time.Duration) {
	sort.Slice(durations, func(i, j int) bool { return durations[i] < durations[j] })
	p99 := durations[len(durations)*99/100]
	b.ReportMetric(float64(len(durations))/total.Seconds(), "req/s")
	b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
}

// BenchmarkListRecurringJobs1000 serves GET /v1/recurringjobs with 1,000
// jobs through the whole router, from the informer cache.
func BenchmarkListRecurringJobs1000(b *testing.B) {
	s := newTestServer(b, testJobs(1000)...)
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rec := httptest.NewRecorder()
		s.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/recurringjobs", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
		durations = append(durations, time.Since(t0))
	}
	reportLatency(b, durations, time.Since(start))
}

// BenchmarkEncodeRecurringJobs1000 is the same list's JSON encoding alone:
// the ratio to the benchmark above is the cost of everything else.
func BenchmarkEncodeRecurringJobs1000(b *testing.B) {
	jobs := make([]*longhorn.RecurringJob, 0, 1000)
	for _, o := range testJobs(1000) {
		jobs = append(jobs, o.(*longhorn.RecurringJob))
	}
	s := &Server{}
	list := s.recurringJobCollection("http://127.0.0.1:9500", jobs)
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := json.NewEncoder(io.Discard).Encode(list); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(t0))
	}
	reportLatency(b, durations, time.Since(start))
}

// BenchmarkWebsocketFanout100 measures, for one change, the time until the
// last of 100 websocket clients has the new list, and what the change
// allocates (the clients' reads included).
func BenchmarkWebsocketFanout100(b *testing.B) {
	b.ReportAllocs()
	s := newTestServer(b, testJobs(10)...)
	const clients = 100
	// The clients share one address here, past the per-address cap.
	s.server.bounds().streams.perClient = clients
	srv := httptest.NewServer(s.handler)
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/ws/recurringjobs"
	conns := make([]*websocket.Conn, clients)
	for i := range conns {
		c, _, err := websocket.DefaultDialer.Dial(url, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if _, _, err := c.ReadMessage(); err != nil {
			b.Fatal(err)
		}
		conns[i] = c
	}
	b.ResetTimer()
	var total time.Duration
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("fanout-%d", i)
		start := time.Now()
		_, err := s.lh.LonghornV1beta2().RecurringJobs(testNamespace).Create(context.Background(), &longhorn.RecurringJob{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
			Spec:       longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 1, Concurrency: 1},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan error, clients)
		for _, c := range conns {
			go func(c *websocket.Conn) {
				for {
					_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
					_, data, err := c.ReadMessage()
					if err != nil {
						done <- err
						return
					}
					if strings.Contains(string(data), `"`+name+`"`) {
						done <- nil
						return
					}
				}
			}(c)
		}
		for range conns {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms-to-last-client")
}
