package kit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/util/workqueue"
)

// A sync that panics for one key is a failed sync of that key: the worker
// logs it with the key and the stack, counts it as an error, retries the key
// with backoff and goes on with the other keys.
func TestBaseControllerRecoversPanickingSync(t *testing.T) {
	logger, hook := logtest.NewNullLogger()
	registry := prometheus.NewRegistry()
	var (
		mu    sync.Mutex
		calls = map[string][]time.Time{}
	)
	syncKey := func(_ context.Context, key string) (Result, error) {
		mu.Lock()
		calls[key] = append(calls[key], time.Now())
		mu.Unlock()
		if key == "ns/bad" {
			var m map[string]int
			m["boom"]++ // a nil map write: a runtime panic, as a bug would be
		}
		return Result{}, nil
	}
	c := NewBase("test-panic", logrus.NewEntry(logger), NewMetrics(registry), syncKey)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	defer func() {
		cancel()
		<-done
	}()

	// One worker: the good keys are synced only if it survived the panic.
	c.Queue.Add("ns/bad")
	c.Queue.Add("ns/good")
	count := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return len(calls[key])
	}
	deadline := time.Now().Add(10 * time.Second)
	for count("ns/bad") < 6 || count("ns/good") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("bad synced %d times, good %d times; want the bad key retried and the good one synced", count("ns/bad"), count("ns/good"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.Queue.Add("ns/good2")
	for count("ns/good2") < 1 {
		if time.Now().After(deadline) {
			t.Fatal("a key added after the panics was never synced: the worker is gone")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Retried with the queue's backoff: requeues are counted and the wait
	// before the sixth attempt is at least the limiter's 5ms doubled four
	// times (a delayed item never comes back early).
	if n := c.Queue.NumRequeues("ns/bad"); n < 5 {
		t.Errorf("NumRequeues(bad) = %d, want the panicking key requeued with backoff", n)
	}
	if n := c.Queue.NumRequeues("ns/good"); n != 0 {
		t.Errorf("NumRequeues(good) = %d, want 0", n)
	}
	mu.Lock()
	at := append([]time.Time(nil), calls["ns/bad"]...)
	mu.Unlock()
	if wait := at[5].Sub(at[4]); wait < 80*time.Millisecond {
		t.Errorf("waited %v before the sixth attempt, want the exponential backoff (80ms)", wait)
	}

	var logged *logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Level == logrus.ErrorLevel && e.Data["key"] == "ns/bad" {
			logged = e
			break
		}
	}
	if logged == nil {
		t.Fatalf("no error logged with the key; entries: %v", hook.AllEntries())
	}
	if logged.Data["controller"] != "test-panic" {
		t.Errorf("controller field = %v, want test-panic", logged.Data["controller"])
	}
	if p, _ := logged.Data["panic"].(string); !strings.Contains(p, "assignment to entry in nil map") {
		t.Errorf("panic field = %q, want the panic value", logged.Data["panic"])
	}
	if s, _ := logged.Data["stack"].(string); !strings.Contains(s, "TestBaseControllerRecoversPanickingSync") {
		t.Errorf("stack field does not show where the panic happened: %q", s)
	}

	if got := reconciles(t, registry, "test-panic", "error"); got < 6 {
		t.Errorf("reconcile errors = %v, want each panic counted", got)
	}
	if got := reconciles(t, registry, "test-panic", "success"); got < 2 {
		t.Errorf("reconcile successes = %v, want the good keys counted", got)
	}
}

func reconciles(t *testing.T, registry *prometheus.Registry, controller, result string) float64 {
	t.Helper()
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "longhorn_manager_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == controller && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// A sync that asks to be requeued after a delay is synced again after that
// delay, not before, and with its backoff reset.
func TestBaseRequeuesAfterTheResultsDelay(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []time.Time
	)
	c := NewBase("test-requeue", logrus.NewEntry(logrus.New()), nil, func(context.Context, string) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, time.Now())
		if len(calls) == 1 {
			return Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		return Result{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	defer func() {
		cancel()
		<-done
	}()
	c.Queue.Add("ns/poll")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the key was not synced again after its RequeueAfter")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if wait := calls[1].Sub(calls[0]); wait < 200*time.Millisecond {
		t.Errorf("synced again after %v, want at least the 200ms asked for", wait)
	}
	if n := c.Queue.NumRequeues("ns/poll"); n != 0 {
		t.Errorf("NumRequeues = %d, want 0: a requeue asked for is not a failure", n)
	}
}

// TestAKeyThatKeepsFailingIsNeverDropped: an object whose sync fails more
// times than the routine retries (a deletion the apiserver refuses for
// minutes) is still synced once it can be: informers without a resync
// would never bring a dropped key back.
func TestAKeyThatKeepsFailingIsNeverDropped(t *testing.T) {
	var calls atomic.Int32
	fails := int32(maxRetries + 5)
	c := NewBase("test-never-drop", logrus.NewEntry(logrus.New()), nil, func(context.Context, string) (Result, error) {
		if calls.Add(1) <= fails {
			return Result{}, errors.New("the apiserver refuses for now")
		}
		return Result{}, nil
	})
	// The same machinery with a short backoff, so the test takes
	// milliseconds rather than the minutes it takes in production.
	c.Queue = workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	defer func() {
		cancel()
		<-done
	}()
	c.Queue.Add("ns/deleting")
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() <= fails {
		if time.Now().After(deadline) {
			t.Fatalf("synced %d times and then no more: the key was dropped before its sync could succeed (attempt %d)", calls.Load(), fails+1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
