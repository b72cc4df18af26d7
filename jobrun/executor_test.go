package jobrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/types"
)

const ns = "longhorn-system"

// fakeManager answers the few API calls a snapshot job makes, from memory,
// taking opLatency for each snapshot creation and failing it for the
// volumes in failing.
type fakeManager struct {
	mu        sync.Mutex
	snapshots map[string][]client.Snapshot
	opLatency time.Duration
	failing   map[string]bool
	inFlight  atomic.Int32
	maxFlight atomic.Int32
}

func (f *fakeManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	switch {
	case parts[0] == "settings":
		value := map[string]string{"recurring-job-max-retention": "100", "allow-recurring-job-while-volume-detached": "false"}[parts[1]]
		reply(200, map[string]string{"value": value})
	case parts[0] == "volumes" && r.Method == http.MethodGet:
		reply(200, client.Volume{Name: parts[1], State: "attached", Robustness: "healthy", NodeID: "node-1"})
	case parts[0] == "volumes":
		vol := parts[1]
		var in struct {
			Name   string
			Labels map[string]string
		}
		json.NewDecoder(r.Body).Decode(&in)
		switch r.URL.Query().Get("action") {
		case "snapshotList":
			f.mu.Lock()
			list := append([]client.Snapshot(nil), f.snapshots[vol]...)
			f.mu.Unlock()
			reply(200, map[string]any{"data": list})
		case "snapshotCreate":
			n := f.inFlight.Add(1)
			defer f.inFlight.Add(-1)
			for {
				m := f.maxFlight.Load()
				if n <= m || f.maxFlight.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(f.opLatency)
			if f.failing[vol] {
				reply(400, map[string]any{"type": "error", "status": 400, "message": "engine refused"})
				return
			}
			f.mu.Lock()
			f.snapshots[vol] = append(f.snapshots[vol], client.Snapshot{Name: in.Name, UserCreated: true, Created: time.Now().Format(time.RFC3339Nano), Labels: in.Labels})
			f.mu.Unlock()
			reply(200, map[string]string{"name": in.Name})
		case "snapshotDelete":
			f.mu.Lock()
			for i := range f.snapshots[vol] {
				if f.snapshots[vol][i].Name == in.Name {
					f.snapshots[vol][i].Removed = true
				}
			}
			f.mu.Unlock()
			reply(200, map[string]string{})
		case "snapshotPurge":
			f.mu.Lock()
			kept := f.snapshots[vol][:0]
			for _, sn := range f.snapshots[vol] {
				if !sn.Removed {
					kept = append(kept, sn)
				}
			}
			f.snapshots[vol] = kept
			f.mu.Unlock()
			reply(200, map[string]string{})
		default:
			reply(200, map[string]string{})
		}
	default:
		reply(404, map[string]any{"status": 404, "message": "not found"})
	}
}

func newExecutor(t testing.TB, volumes int, concurrency int, f *fakeManager) *Executor {
	t.Helper()
	return newTaskExecutor(t, volumes, longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 1, Concurrency: concurrency}, f)
}

// newTaskExecutor runs a job named snap with spec over volumes labelled for it.
func newTaskExecutor(t testing.TB, volumes int, spec longhorn.RecurringJobSpec, f http.Handler) *Executor {
	t.Helper()
	objs := []runtime.Object{&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns}, Spec: spec}}
	for i := 0; i < volumes; i++ {
		objs = append(objs, &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("vol-%04d", i), Namespace: ns, Labels: map[string]string{"recurring-job.longhorn.io/snap": "enabled"},
		}})
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	return &Executor{
		Namespace: ns, Longhorn: lhfake.NewSimpleClientset(objs...), Kube: kubefake.NewSimpleClientset(),
		API: client.NewClient(srv.URL+"/v1", time.Second), Log: logrus.NewEntry(log), RetryFor: time.Second,
		Tick: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC), BackupTimeout: time.Minute,
	}
}

func TestAFailingVolumeDoesNotFailTheOthers(t *testing.T) {
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}, failing: map[string]bool{"vol-0002": true}}
	r := newExecutor(t, 6, 3, f)
	res, err := r.Run(context.Background(), "snap")
	if err != nil {
		t.Fatal(err)
	}
	if res.Succeeded != 5 || res.Failed != 1 || res.Skipped != 0 {
		t.Fatalf("result %+v", res)
	}
	if err := res.Err(); !errors.Is(err, ErrVolumesFailed) || !strings.Contains(err.Error(), "1 of 6") {
		t.Fatalf("a run with a failed volume: Err() = %v, want it failed, 1 of 6", err)
	}
	if err := (Result{Succeeded: 3, Skipped: 2}).Err(); err != nil {
		t.Fatalf("a run with no failed volume: Err() = %v", err)
	}
	if res.MaxInFlight > 3 || f.maxFlight.Load() > 3 {
		t.Fatalf("concurrency 3 exceeded: runner %d, server %d", res.MaxInFlight, f.maxFlight.Load())
	}
	events, _ := r.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if len(events.Items) != 1 || events.Items[0].Type != "Warning" || !strings.Contains(events.Items[0].Message, "5 volumes succeeded, 1 failed") {
		t.Fatalf("events %+v", events.Items)
	}
}

func TestAMissingJobEndsTheRunCleanly(t *testing.T) {
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}}
	r := newExecutor(t, 1, 1, f)
	if res, err := r.Run(context.Background(), "gone"); err != nil || res != (Result{}) {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestAnUnreachableManagerStopsTheRunWithAClearError(t *testing.T) {
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}}
	r := newExecutor(t, 1, 1, f)
	r.API = client.NewClient("http://127.0.0.1:1/v1", 300*time.Millisecond)
	if _, err := r.Run(context.Background(), "snap"); err == nil || !strings.Contains(err.Error(), "manager API cannot be reached") {
		t.Fatalf("want a clear error, got %v", err)
	}
}

// BenchmarkOneThousandVolumes runs a snapshot job over 1,000 volumes with
// concurrency 10 against a manager that takes 20 ms per snapshot, and
// reports the wall time against the ideal ceil(1000/10) x 20 ms.
func BenchmarkOneThousandVolumes(b *testing.B) {
	const latency = 20 * time.Millisecond
	for i := 0; i < b.N; i++ {
		f := &fakeManager{snapshots: map[string][]client.Snapshot{}, opLatency: latency}
		r := newExecutor(b, 1000, 10, f)
		start := time.Now()
		res, err := r.Run(context.Background(), "snap")
		if err != nil || res.Succeeded != 1000 {
			b.Fatalf("%+v, %v", res, err)
		}
		ideal := 100 * latency
		b.ReportMetric(time.Since(start).Seconds()/ideal.Seconds(), "x-ideal")
		b.ReportMetric(float64(f.maxFlight.Load()), "max-in-flight")
	}
}

func snapshotsAt(minutes ...int) []client.Snapshot {
	var out []client.Snapshot
	for _, m := range minutes {
		out = append(out, client.Snapshot{Name: fmt.Sprintf("s%d", m), UserCreated: true, Created: fmt.Sprintf("2026-11-22T01:%02d:00Z", m)})
	}
	return out
}

func names(list []client.Snapshot) string {
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return strings.Join(out, ",")
}

func TestSnapshotDeleteKeepsTheNewestRetainUserSnapshots(t *testing.T) {
	user := snapshotsAt(5, 1, 3, 2, 4)
	system := client.Snapshot{Name: "sys", UserCreated: false, Created: "2026-11-22T01:00:00Z"}
	f := &fakeManager{snapshots: map[string][]client.Snapshot{"vol-0000": append(user, system)}}
	r := newTaskExecutor(t, 1, longhorn.RecurringJobSpec{Task: "snapshot-delete", Cron: "@hourly", Retain: 2, Concurrency: 1}, f)
	if res, err := r.Run(context.Background(), "snap"); err != nil || res.Succeeded != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := names(f.snapshots["vol-0000"]); got != "s5,s4,sys" {
		t.Fatalf("left %s, want the two newest user snapshots and the system one", got)
	}
}

func TestSnapshotCleanupRemovesSystemSnapshotsOnly(t *testing.T) {
	system := []client.Snapshot{{Name: "sys1", Created: "2026-11-22T01:00:00Z"}, {Name: "sys2", Created: "2026-11-22T01:01:00Z"}}
	f := &fakeManager{snapshots: map[string][]client.Snapshot{"vol-0000": append(snapshotsAt(3, 4), system...)}}
	r := newTaskExecutor(t, 1, longhorn.RecurringJobSpec{Task: "snapshot-cleanup", Cron: "@hourly", Retain: 0, Concurrency: 1}, f)
	if res, err := r.Run(context.Background(), "snap"); err != nil || res.Succeeded != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	if got := names(f.snapshots["vol-0000"]); got != "s3,s4" {
		t.Fatalf("left %s, want the user snapshots only", got)
	}
}

func TestSnapshotTaskCleansUpBeforeItCreates(t *testing.T) {
	mine := func(name, created string) client.Snapshot {
		return client.Snapshot{Name: name, UserCreated: true, Created: created, Labels: map[string]string{"RecurringJob": "snap"}}
	}
	f := &fakeManager{snapshots: map[string][]client.Snapshot{"vol-0000": {
		mine("old1", "2026-11-22T00:01:00Z"), mine("old2", "2026-11-22T00:02:00Z"), mine("old3", "2026-11-22T00:03:00Z"),
		{Name: "other", UserCreated: true, Created: "2026-11-22T00:00:00Z"},
	}}}
	r := newTaskExecutor(t, 1, longhorn.RecurringJobSpec{Task: "snapshot", Cron: "@hourly", Retain: 2, Concurrency: 1}, f)
	if res, err := r.Run(context.Background(), "snap"); err != nil || res.Succeeded != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	left := f.snapshots["vol-0000"]
	if len(left) != 3 || left[0].Name != "old3" || left[1].Name != "other" || !strings.HasPrefix(left[2].Name, "snap-c-") {
		t.Fatalf("left %s: want old3, the other job's snapshot and the new one", names(left))
	}
	if left[2].Labels["RecurringJob"] != "snap" || left[2].Labels[types.LabelRecurringJobTick] != "20261122T010000Z" {
		t.Fatalf("new snapshot labels %v", left[2].Labels)
	}
}

// TestSnapshotsSortByCreationTimeNotByString: within one second, RFC 3339
// with nanoseconds puts "05Z" after "05.5Z" as strings; retention must
// keep the newest, so the order is the times'.
func TestSnapshotsSortByCreationTimeNotByString(t *testing.T) {
	list := []client.Snapshot{
		{Name: "c", Created: "2026-11-23T03:00:05.5Z"},
		{Name: "a", Created: "2026-11-23T03:00:05Z"},
		{Name: "d", Created: "2026-11-23T03:00:06Z"},
		{Name: "b", Created: "2026-11-23T03:00:05.25Z"},
	}
	sortByCreated(list)
	var got []string
	for _, s := range list {
		got = append(got, s.Name)
	}
	if strings.Join(got, "") != "abcd" {
		t.Fatalf("order %v, want a b c d (oldest first)", got)
	}
}

// TestARunWithARecorderRecordsThroughIt: the manager runner's Events go
// through its recorder (its aggregation and rate limits), not straight to
// the apiserver.
func TestARunWithARecorderRecordsThroughIt(t *testing.T) {
	f := &fakeManager{snapshots: map[string][]client.Snapshot{}, failing: map[string]bool{"vol-0001": true}}
	r := newExecutor(t, 2, 2, f)
	rec := record.NewFakeRecorder(10)
	r.Recorder = rec
	if _, err := r.Run(context.Background(), "snap"); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning VolumesFailed") || !strings.Contains(ev, "1 volumes succeeded, 1 failed") {
			t.Fatalf("recorded %q", ev)
		}
	default:
		t.Fatal("nothing recorded")
	}
	if events, _ := r.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{}); len(events.Items) != 0 {
		t.Fatalf("events written past the recorder: %+v", events.Items)
	}
}
