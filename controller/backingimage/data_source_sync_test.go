package backingimage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// fakeServers is a runner.ServerRunner that starts nothing: it records
// what the controller asks and answers as told.
type fakeServers struct {
	mu       sync.Mutex
	started  [][]string
	stopped  []string
	startErr error
	// address answers Address; nil means never started.
	address func(key string) (string, error)
}

func (f *fakeServers) Start(key string, args []string, _ ...runner.ServerOption) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, args)
	if f.startErr != nil {
		return f.startErr
	}
	f.address = func(string) (string, error) { return "127.0.0.1:1", nil }
	return nil
}

func (f *fakeServers) Stop(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, key)
}

func (f *fakeServers) Address(key string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.address == nil {
		return "", runner.ErrServerNotStarted
	}
	return f.address(key)
}

func syncDataSource(mutate ...func(*longhorn.BackingImageDataSource)) *longhorn.BackingImageDataSource {
	bids := &longhorn.BackingImageDataSource{
		ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "ns"},
		Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", NodeID: "node-1", DiskUUID: "d1", DiskPath: "/disks/d1",
			SourceType: longhorn.BackingImageDataSourceTypeDownload, Parameters: map[string]string{"url": "http://example.com/img.raw"}},
	}
	for _, m := range mutate {
		m(bids)
	}
	return bids
}

// TestDataSourceControllerSync is the data source controller's sync
// decision by decision, on a fake clientset and a fake server runner (the
// control-plane suite runs the real servers).
func TestDataSourceControllerSync(t *testing.T) {
	died := func(string) (string, error) { return "", errors.New("exited: disk full") }
	for _, tc := range []struct {
		name     string
		bids     *longhorn.BackingImageDataSource
		servers  *fakeServers
		started  bool   // a server start was asked for
		stopped  bool   // a server stop was asked for
		state    string // the state written, "" for no status write
		requeue  time.Duration
		messages []string // in the written message
	}{
		{name: "another node's data source: nothing", bids: syncDataSource(func(b *longhorn.BackingImageDataSource) { b.Spec.NodeID = "node-2" }),
			servers: &fakeServers{}},
		{name: "being deleted: its server stops", bids: syncDataSource(func(b *longhorn.BackingImageDataSource) {
			b.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			b.Finalizers = []string{"longhorn.io"}
		}), servers: &fakeServers{address: func(string) (string, error) { return "127.0.0.1:1", nil }}, stopped: true},
		{name: "the file was handed over: the server stops", bids: syncDataSource(func(b *longhorn.BackingImageDataSource) {
			b.Spec.FileTransferred = true
			b.Status.CurrentState = longhorn.BackingImageStateReadyForTransfer
			b.Status.IP = "127.0.0.1"
		}), servers: &fakeServers{address: func(string) (string, error) { return "127.0.0.1:1", nil }}, stopped: true,
			state: string(longhorn.BackingImageStateReadyForTransfer)},
		{name: "no server yet: one is started, and the state is starting", bids: syncDataSource(), servers: &fakeServers{},
			started: true, state: string(longhorn.BackingImageStateStarting)},
		{name: "the server's pod is on its way: starting, looked at again soon",
			bids: syncDataSource(), servers: &fakeServers{startErr: fmt.Errorf("%w: pod pulling", runner.ErrServerPending)},
			started: true, state: string(longhorn.BackingImageStateStarting), requeue: serverPendingRecheck},
		{name: "the server cannot start: failed, with why, tried again after a backoff", bids: syncDataSource(), servers: &fakeServers{startErr: errors.New("no such image")},
			started: true, state: string(longhorn.BackingImageStateFailed), requeue: dataSourceRestartBackoff, messages: []string{"no such image"}},
		{name: "an upload's server died: failed for good, not restarted",
			bids: syncDataSource(func(b *longhorn.BackingImageDataSource) {
				b.Spec.SourceType = longhorn.BackingImageDataSourceTypeUpload
			}),
			servers: &fakeServers{address: died}, state: string(longhorn.BackingImageStateFailed), messages: []string{"disk full"}},
		{name: "a download's server died: failed, restarted after a backoff", bids: syncDataSource(), servers: &fakeServers{address: died},
			state: string(longhorn.BackingImageStateFailed), requeue: dataSourceRestartBackoff, messages: []string{"disk full"}},
		{name: "a spec without its disk: failed, naming the fields", bids: syncDataSource(func(b *longhorn.BackingImageDataSource) { b.Spec.DiskPath = "" }),
			servers: &fakeServers{}, state: string(longhorn.BackingImageStateFailed), requeue: dataSourceRestartBackoff, messages: []string{"spec.diskPath"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.bids)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			if err := inf.Longhorn.Longhorn().V1beta2().BackingImageDataSources().Informer().GetIndexer().Add(tc.bids); err != nil {
				t.Fatal(err)
			}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			c := NewDataSourceController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", tc.servers,
				clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)), record.NewFakeRecorder(10), mtlstest.Identity(t))
			defer c.Queue.ShutDown()
			defer c.monitors.stopAll()
			lh.ClearActions()

			result, err := c.sync(context.Background(), "ns/img")
			if err != nil {
				t.Fatalf("sync: %v", err)
			}
			if result != (kit.Result{RequeueAfter: tc.requeue}) {
				t.Errorf("result %+v, want RequeueAfter %v", result, tc.requeue)
			}
			if got := len(tc.servers.started) > 0; got != tc.started {
				t.Errorf("started %v, want a start: %v", tc.servers.started, tc.started)
			}
			if got := slices.Contains(tc.servers.stopped, dataSourceServerKey("img")); got != tc.stopped {
				t.Errorf("stopped %v, want a stop: %v", tc.servers.stopped, tc.stopped)
			}
			var written *longhorn.BackingImageDataSource
			for _, a := range lh.Actions() {
				if a.GetVerb() == "update" && a.GetSubresource() == "status" {
					got, err := lh.LonghornV1beta2().BackingImageDataSources("ns").Get(context.Background(), "img", metav1.GetOptions{})
					if err != nil {
						t.Fatal(err)
					}
					written = got
				}
			}
			switch {
			case tc.state == "" && written != nil:
				t.Errorf("a status was written: %+v", written.Status)
			case tc.state != "" && written == nil:
				t.Errorf("no status written, want state %s", tc.state)
			case written != nil:
				if string(written.Status.CurrentState) != tc.state {
					t.Errorf("state %s (%q), want %s", written.Status.CurrentState, written.Status.Message, tc.state)
				}
				for _, m := range tc.messages {
					if !strings.Contains(written.Status.Message, m) {
						t.Errorf("message %q does not say %q", written.Status.Message, m)
					}
				}
			}
		})
	}
}
