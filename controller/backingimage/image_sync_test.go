package backingimage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

const testManagerImage = "longhorn-manager:test"

// testNode is a Ready node with one Ready disk, d1 at /disks/d1.
func testNode(name string, up bool) *longhorn.Node {
	ready := longhorn.ConditionStatusTrue
	if !up {
		ready = longhorn.ConditionStatusFalse
	}
	return &longhorn.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       longhorn.NodeSpec{Disks: map[string]longhorn.DiskSpec{"disk-1": {Path: "/disks/" + name}}},
		Status: longhorn.NodeStatus{
			Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: ready}},
			DiskStatus: map[string]*longhorn.DiskStatus{"disk-1": {DiskUUID: "d-" + name,
				Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}},
		},
	}
}

// testImage is a backing image owned by node-1, with its UUID and its
// finalizer, on node-1's disk; mutate takes it back to an earlier stage.
func testImage(mutate ...func(*longhorn.BackingImage)) *longhorn.BackingImage {
	bi := &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "ns", Finalizers: []string{"longhorn.io"}},
		Spec: longhorn.BackingImageSpec{Disks: map[string]string{"d-node-1": ""}, SourceType: longhorn.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{"url": "http://example.com/img.raw"}},
		Status: longhorn.BackingImageStatus{OwnerID: "node-1", UUID: "u1"},
	}
	for _, m := range mutate {
		m(bi)
	}
	return bi
}

// writes lists the writes a sync made, as "verb resource[/subresource]".
func writes(actions []k8stesting.Action) []string {
	var out []string
	for _, a := range actions {
		if a.GetVerb() == "get" || a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		w := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			w += "/" + a.GetSubresource()
		}
		out = append(out, w)
	}
	return out
}

// TestImageControllerSync is the BackingImage controller's sync decision
// by decision, on a fake clientset (the control-plane suite runs it with
// real servers): each case gives the objects the caches hold, and checks
// the writes the sync makes and what they hold.
func TestImageControllerSync(t *testing.T) {
	fileReady := func(state longhorn.BackingImageState) *longhorn.BackingImageManager {
		bim := newManager(testManagerImage, "node-1", "d-node-1", "/disks/node-1", nil)
		bim.Namespace = "ns"
		bim.Spec.BackingImages["img"] = "u1"
		bim.Status.BackingImageFileMap = map[string]longhorn.BackingImageFileInfo{"img": {Name: "img", UUID: "u1", State: state, Size: 4096}}
		return bim
	}
	dataSource := func(uuid string) *longhorn.BackingImageDataSource {
		return &longhorn.BackingImageDataSource{ObjectMeta: metav1.ObjectMeta{Name: "img", Namespace: "ns"},
			Spec: longhorn.BackingImageDataSourceSpec{UUID: uuid, NodeID: "node-1", DiskUUID: "d-node-1", DiskPath: "/disks/node-1",
				SourceType: longhorn.BackingImageDataSourceTypeDownload}}
	}
	for _, tc := range []struct {
		name    string
		objects []runtime.Object
		writes  []string
		err     string
		check   func(t *testing.T, lh *lhfake.Clientset)
	}{
		{name: "owned by a peer that is up: nothing",
			objects: []runtime.Object{testImage(func(b *longhorn.BackingImage) { b.Status.OwnerID = "node-2" }), testNode("node-2", true)}},
		{name: "owned by a peer that is down: taken over in one status write",
			objects: []runtime.Object{testImage(func(b *longhorn.BackingImage) { b.Status.OwnerID = "node-2" }), testNode("node-2", false)},
			writes:  []string{"update backingimages/status"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				if bi := getImage(t, lh); bi.Status.OwnerID != "node-1" || bi.Status.UUID != "u1" {
					t.Errorf("status %+v, want node-1 owning it with its UUID kept", bi.Status)
				}
			}},
		{name: "new: the finalizer first, nothing else",
			objects: []runtime.Object{testImage(func(b *longhorn.BackingImage) { b.Finalizers, b.Status = nil, longhorn.BackingImageStatus{} })},
			writes:  []string{"update backingimages"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				if bi := getImage(t, lh); len(bi.Finalizers) != 1 || bi.Status.OwnerID != "" {
					t.Errorf("finalizers %v, owner %q", bi.Finalizers, bi.Status.OwnerID)
				}
			}},
		{name: "with its finalizer: the owner and a UUID in one status write",
			objects: []runtime.Object{testImage(func(b *longhorn.BackingImage) { b.Status = longhorn.BackingImageStatus{} })},
			writes:  []string{"update backingimages/status"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				if bi := getImage(t, lh); bi.Status.OwnerID != "node-1" || len(bi.Status.UUID) != 8 {
					t.Errorf("status %+v, want owner node-1 and an 8-character UUID", bi.Status)
				}
			}},
		{name: "no disk named: the first disk of this node",
			objects: []runtime.Object{testImage(func(b *longhorn.BackingImage) { b.Spec.Disks = nil }), testNode("node-1", true)},
			writes:  []string{"update backingimages"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				if bi := getImage(t, lh); len(bi.Spec.Disks) != 1 || bi.Spec.Disks["d-node-1"] != "" {
					t.Errorf("spec.disks %v, want node-1's disk", bi.Spec.Disks)
				}
			}},
		{name: "a disk and nothing else: its data source and the disk's manager are made, the status says pending",
			objects: []runtime.Object{testImage(), testNode("node-1", true)},
			writes:  []string{"create backingimagedatasources", "create backingimagemanagers", "update backingimages/status"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				bids, err := lh.LonghornV1beta2().BackingImageDataSources("ns").Get(context.Background(), "img", metav1.GetOptions{})
				if err != nil || bids.Spec.UUID != "u1" || bids.Spec.NodeID != "node-1" || bids.Spec.DiskUUID != "d-node-1" ||
					bids.Spec.DiskPath != "/disks/node-1" || bids.Spec.Parameters["url"] != "http://example.com/img.raw" || len(bids.OwnerReferences) != 1 {
					t.Errorf("data source %+v, %v", bids, err)
				}
				bim, err := lh.LonghornV1beta2().BackingImageManagers("ns").Get(context.Background(), managerName(testManagerImage, "d-node-1"), metav1.GetOptions{})
				if err != nil || bim.Spec.Image != testManagerImage || bim.Spec.NodeID != "node-1" || bim.Spec.BackingImages["img"] != "u1" {
					t.Errorf("manager %+v, %v", bim, err)
				}
				if f := getImage(t, lh).Status.DiskFileStatusMap["d-node-1"]; f == nil || f.State == longhorn.BackingImageStateReady {
					t.Errorf("the disk's file status %+v, want one not ready", f)
				}
			}},
		{name: "the data source of an older image of the same name: deleted, and the sync waits for it",
			objects: []runtime.Object{testImage(), testNode("node-1", true), dataSource("old")},
			writes:  []string{"delete backingimagedatasources"}, err: "waiting for the old data source"},
		{name: "a manager holds the file ready: the data source is marked transferred and the disk ready",
			objects: []runtime.Object{testImage(), testNode("node-1", true), dataSource("u1"), fileReady(longhorn.BackingImageStateReady)},
			writes:  []string{"update backingimagedatasources", "update backingimages/status"},
			check: func(t *testing.T, lh *lhfake.Clientset) {
				bids, err := lh.LonghornV1beta2().BackingImageDataSources("ns").Get(context.Background(), "img", metav1.GetOptions{})
				if err != nil || !bids.Spec.FileTransferred {
					t.Errorf("data source %+v, %v: want fileTransferred", bids, err)
				}
				if f := getImage(t, lh).Status.DiskFileStatusMap["d-node-1"]; f == nil || f.State != longhorn.BackingImageStateReady {
					t.Errorf("the disk's file status %+v, want ready", f)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, lh, inf := newImageSyncTest(t, tc.objects...)
			_, err := c.sync(context.Background(), "ns/img")
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("sync: %v, want an error containing %q", err, tc.err)
			}
			if got := writes(lh.Actions()); strings.Join(got, ", ") != strings.Join(tc.writes, ", ") {
				t.Fatalf("writes %v, want %v", got, tc.writes)
			}
			if tc.check != nil {
				tc.check(t, lh)
			}
			if tc.err != "" {
				return
			}
			// What the sync wrote, back in the caches: the next sync of an
			// image in step writes nothing (no write feeds on its own).
			for round := 0; round < 3 && len(lh.Actions()) > 0; round++ {
				refreshCaches(t, lh, inf)
				lh.ClearActions()
				if _, err := c.sync(context.Background(), "ns/img"); err != nil {
					t.Fatalf("sync again: %v", err)
				}
			}
			if got := writes(lh.Actions()); len(got) > 0 {
				t.Errorf("the sync keeps writing with nothing changed: %v", got)
			}
		})
	}
}

// newImageSyncTest is an image controller of node-1 on a fake clientset
// holding objects, with its caches filled and not started (a sync reads
// what they hold and nothing else).
func newImageSyncTest(t *testing.T, objects ...runtime.Object) (*ImageController, *lhfake.Clientset, datastore.Informers) {
	t.Helper()
	lh := lhfake.NewSimpleClientset(objects...)
	kube := kubefake.NewSimpleClientset()
	inf := datastore.NewInformers(lh, kube, "ns", 0)
	for _, o := range append(objects, testNode("node-1", true)) {
		if err := indexerOf(inf, o).Add(o); err != nil {
			t.Fatal(err)
		}
	}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	c := NewImageController(logrus.NewEntry(log), nil, datastore.New("ns", lh, kube, inf), inf,
		ImageControllerConfig{NodeID: "node-1", ManagerImage: testManagerImage, Clock: clk, Recorder: record.NewFakeRecorder(100)})
	t.Cleanup(c.Queue.ShutDown)
	lh.ClearActions()
	return c, lh, inf
}

func indexerOf(inf datastore.Informers, o runtime.Object) cache.Indexer {
	lh := inf.Longhorn.Longhorn().V1beta2()
	switch o.(type) {
	case *longhorn.BackingImage:
		return lh.BackingImages().Informer().GetIndexer()
	case *longhorn.Node:
		return lh.Nodes().Informer().GetIndexer()
	case *longhorn.BackingImageDataSource:
		return lh.BackingImageDataSources().Informer().GetIndexer()
	case *longhorn.BackingImageManager:
		return lh.BackingImageManagers().Informer().GetIndexer()
	}
	panic(fmt.Sprintf("no cache of %T in this test", o))
}

// refreshCaches puts what the fake clientset holds into the caches, as
// the informers would.
func refreshCaches(t *testing.T, lh *lhfake.Clientset, inf datastore.Informers) {
	t.Helper()
	ctx := context.Background()
	bis, _ := lh.LonghornV1beta2().BackingImages("ns").List(ctx, metav1.ListOptions{})
	bidss, _ := lh.LonghornV1beta2().BackingImageDataSources("ns").List(ctx, metav1.ListOptions{})
	bims, _ := lh.LonghornV1beta2().BackingImageManagers("ns").List(ctx, metav1.ListOptions{})
	var objects []runtime.Object
	for i := range bis.Items {
		objects = append(objects, &bis.Items[i])
	}
	for i := range bidss.Items {
		objects = append(objects, &bidss.Items[i])
	}
	for i := range bims.Items {
		objects = append(objects, &bims.Items[i])
	}
	for _, o := range objects {
		if err := indexerOf(inf, o).Update(o); err != nil {
			t.Fatal(err)
		}
	}
}

func getImage(t *testing.T, lh *lhfake.Clientset) *longhorn.BackingImage {
	t.Helper()
	bi, err := lh.LonghornV1beta2().BackingImages("ns").Get(context.Background(), "img", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return bi
}
