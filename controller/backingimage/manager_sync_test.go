package backingimage

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/backingimage/runner"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// TestManagerControllerSync is the BackingImageManager controller's sync
// decision by decision, on a fake clientset and a fake server runner, up
// to the point where it talks to a running manager server (the
// control-plane suite runs real servers and their files).
func TestManagerControllerSync(t *testing.T) {
	running := func() *fakeServers {
		return &fakeServers{address: func(string) (string, error) { return "127.0.0.1:1", nil }}
	}
	manager := func(image string, mutate ...func(*longhorn.BackingImageManager)) *longhorn.BackingImageManager {
		bim := newManager(image, "node-1", "d-node-1", "/disks/node-1", nil)
		bim.Namespace = "ns"
		bim.ResourceVersion = "7"
		bim.Spec.BackingImages["img"] = "u1"
		bim.Status.CurrentState = longhorn.BackingImageManagerStateRunning
		bim.Status.BackingImageFileMap = map[string]longhorn.BackingImageFileInfo{"img": {Name: "img", UUID: "u1", State: longhorn.BackingImageStateReady}}
		for _, m := range mutate {
			m(bim)
		}
		return bim
	}
	current := manager(testManagerImage)
	old := manager("longhorn-manager:old")
	nodeWithDisk := func(ready bool, path string) *longhorn.Node {
		n := testNode("node-1", true)
		n.Spec.Disks["disk-1"] = longhorn.DiskSpec{Path: path}
		if !ready {
			n.Status.DiskStatus["disk-1"].Conditions = []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusFalse,
				Message: "another disk is mounted at /disks/node-1"}}
		}
		return n
	}
	for _, tc := range []struct {
		name     string
		key      string // synced; the current manager's when empty
		objects  []runtime.Object
		servers  *fakeServers
		writes   []string
		started  bool
		stopped  bool
		err      string
		requeue  time.Duration
		state    longhorn.BackingImageManagerState // written, when not ""
		messages []string                          // in every file's message
	}{
		{name: "another node's manager: nothing", objects: []runtime.Object{manager(testManagerImage, func(b *longhorn.BackingImageManager) { b.Spec.NodeID = "node-2" })},
			servers: running()},
		{name: "its object is gone: its server stops", key: "ns/gone", servers: running(), stopped: true},
		{name: "being deleted: its server stops, nothing written", objects: []runtime.Object{manager(testManagerImage, func(b *longhorn.BackingImageManager) {
			b.DeletionTimestamp, b.Finalizers = &metav1.Time{Time: time.Now()}, []string{"longhorn.io"}
		})}, servers: running(), stopped: true},
		{name: "keeping no file: deleted if unchanged, and its server stops",
			objects: []runtime.Object{manager(testManagerImage, func(b *longhorn.BackingImageManager) {
				b.Spec.BackingImages, b.Status.BackingImageFileMap = map[string]string{}, nil
			})}, servers: running(), writes: []string{"delete backingimagemanagers"}, stopped: true},
		{name: "an old image's manager whose replacement has every file ready: deleted, the server stops",
			key: "ns/" + old.Name, objects: []runtime.Object{old, current, testNode("node-1", true)}, servers: running(),
			writes: []string{"delete backingimagemanagers"}, stopped: true},
		{name: "its disk is gone from the node: the server stops, the files are unknown, saying why",
			objects: []runtime.Object{current, func() *longhorn.Node {
				n := testNode("node-1", true)
				n.Status.DiskStatus = nil
				return n
			}()}, servers: running(), stopped: true, writes: []string{"update backingimagemanagers/status"},
			state: longhorn.BackingImageManagerStateUnknown, messages: []string{"disk d-node-1 is gone from node node-1"}},
		{name: "its disk is not ready: the server stops, the files are unknown, saying why",
			objects: []runtime.Object{current, nodeWithDisk(false, "/disks/node-1")}, servers: running(), stopped: true,
			writes: []string{"update backingimagemanagers/status"}, state: longhorn.BackingImageManagerStateUnknown,
			messages: []string{"is not ready", "another disk is mounted"}},
		{name: "no server: one is started; its pod on the way: starting, looked at again soon",
			objects: []runtime.Object{current, testNode("node-1", true)}, servers: &fakeServers{startErr: fmt.Errorf("%w: pulling", runner.ErrServerPending)},
			started: true, writes: []string{"update backingimagemanagers/status"}, state: longhorn.BackingImageManagerStateStarting, requeue: serverPendingRecheck},
		{name: "the server cannot start: error, and the sync's error",
			objects: []runtime.Object{current, testNode("node-1", true)}, servers: &fakeServers{startErr: errors.New("no such image")},
			started: true, writes: []string{"update backingimagemanagers/status"}, state: longhorn.BackingImageManagerStateError, err: "no such image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lh := lhfake.NewSimpleClientset(tc.objects...)
			kube := kubefake.NewSimpleClientset()
			inf := datastore.NewInformers(lh, kube, "ns", 0)
			for _, o := range tc.objects {
				if err := indexerOf(inf, o).Add(o); err != nil {
					t.Fatal(err)
				}
			}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			c := NewManagerController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf, "node-1", testManagerImage, tc.servers, mtlstest.Identity(t))
			defer c.Queue.ShutDown()
			defer c.clients.stopAll()
			lh.ClearActions()
			key := tc.key
			if key == "" {
				key = "ns/" + current.Name
			}

			result, err := c.sync(context.Background(), key)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("sync: %v, want an error containing %q", err, tc.err)
			}
			if result != (kit.Result{RequeueAfter: tc.requeue}) {
				t.Errorf("result %+v, want RequeueAfter %v", result, tc.requeue)
			}
			if got := writes(lh.Actions()); strings.Join(got, ", ") != strings.Join(tc.writes, ", ") {
				t.Fatalf("writes %v, want %v", got, tc.writes)
			}
			if started := len(tc.servers.started) > 0; started != tc.started {
				t.Errorf("server started %v, want %v", started, tc.started)
			}
			if stopped := len(tc.servers.stopped) > 0; stopped != tc.stopped {
				t.Errorf("server stopped %v, want %v", stopped, tc.stopped)
			}
			for _, w := range tc.writes {
				if !strings.HasPrefix(w, "delete") {
					continue
				}
				name := strings.TrimPrefix(key, "ns/")
				if _, err := lh.LonghornV1beta2().BackingImageManagers("ns").Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("manager %s still there: %v", name, err)
				}
			}
			if tc.state == "" {
				return
			}
			bim, err := lh.LonghornV1beta2().BackingImageManagers("ns").Get(context.Background(), current.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if bim.Status.CurrentState != tc.state || bim.Status.OwnerID != "node-1" {
				t.Errorf("status %+v, want state %s owned by node-1", bim.Status, tc.state)
			}
			for fname, f := range bim.Status.BackingImageFileMap {
				for _, m := range tc.messages {
					if !strings.Contains(f.Message, m) || f.State != longhorn.BackingImageStateUnknown {
						t.Errorf("file %s: %+v, want unknown with %q in its message", fname, f, m)
					}
				}
			}
		})
	}
}
