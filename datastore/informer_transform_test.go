package datastore

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func cached(t *testing.T, obj any) any {
	t.Helper()
	out, err := cacheTransform(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameMap[V any](a, b map[string]V) bool {
	return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b)
}

// The informers cache objects without their managedFields; anything that
// is not an object (a tombstone) passes as it is.
func TestInformersDropManagedFields(t *testing.T) {
	s := &longhorn.Snapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"k": "v"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "longhorn-manager", Operation: metav1.ManagedFieldsOperationUpdate}}}}
	if got := cached(t, s).(*longhorn.Snapshot); got.ManagedFields != nil || got.Labels["k"] != "v" {
		t.Fatalf("got %+v, want the object without managedFields", got.ObjectMeta)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: s}
	if out := cached(t, tomb); out != tomb {
		t.Fatalf("a tombstone became %v", out)
	}
}

// Snapshots of one volume, and their entries in the engine's status, hold
// one copy of each label map, children map, finalizer list and owner list
// they have in common, and nothing that differs is merged.
func TestCachedObjectsShareWhatTheyRepeat(t *testing.T) {
	shared = newSharedPools()
	owner := func() []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "longhorn.io/v1beta2", Kind: "Volume", Name: "vol", UID: "u1"}}
	}
	snap := func(name, volume, job, child string) *longhorn.Snapshot {
		return &longhorn.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system",
				Labels: map[string]string{"longhornvolume": volume}, OwnerReferences: owner(),
				// As JSON decodes it: room to grow in place.
				Finalizers: append(make([]string, 0, 4), "longhorn.io")},
			Spec:   longhorn.SnapshotSpec{Volume: volume, Labels: map[string]string{"RecurringJob": job}},
			Status: longhorn.SnapshotStatus{Labels: map[string]string{"RecurringJob": job}, Children: map[string]bool{child: true}},
		}
	}
	a := cached(t, snap("a", "vol", "hourly", "b")).(*longhorn.Snapshot)
	b := cached(t, snap("b", "vol", "hourly", "volume-head")).(*longhorn.Snapshot)
	other := cached(t, snap("c", "vol2", "daily", "b")).(*longhorn.Snapshot)
	e := cached(t, &longhorn.Engine{
		ObjectMeta: metav1.ObjectMeta{Name: "vol-e-0", Labels: map[string]string{"longhornvolume": "vol"}},
		Status: longhorn.EngineStatus{Snapshots: map[string]*longhorn.SnapshotInfo{
			"a": {Name: "a", Children: map[string]bool{"b": true}, Labels: map[string]string{"RecurringJob": "hourly"}},
			"b": {Name: "b", Children: map[string]bool{"volume-head": true}, Labels: map[string]string{"RecurringJob": "hourly"}},
		}},
	}).(*longhorn.Engine)

	for _, c := range []struct {
		what       string
		same       bool
		want, have map[string]string
	}{
		{"two snapshots' volume labels", true, a.Labels, b.Labels},
		{"a snapshot's volume label and its engine's", true, a.Labels, e.Labels},
		{"a snapshot's labels in its spec and status", true, a.Spec.Labels, a.Status.Labels},
		{"a snapshot's labels and its entry's in the engine", true, a.Status.Labels, e.Status.Snapshots["b"].Labels},
		{"the volume labels of two volumes", false, a.Labels, other.Labels},
		{"the labels of two jobs", false, a.Spec.Labels, other.Spec.Labels},
	} {
		if sameMap(c.want, c.have) != c.same {
			t.Errorf("%s: shared %v, want %v (%v, %v)", c.what, !c.same, c.same, c.want, c.have)
		}
	}
	if !sameMap(a.Status.Children, e.Status.Snapshots["a"].Children) || !sameMap(a.Status.Children, other.Status.Children) {
		t.Errorf("equal children are not shared: %p %p %p", a.Status.Children, e.Status.Snapshots["a"].Children, other.Status.Children)
	}
	if sameMap(a.Status.Children, b.Status.Children) {
		t.Errorf("different children are shared")
	}
	if &a.Finalizers[0] != &b.Finalizers[0] || &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Errorf("the finalizers or owners of two snapshots of one volume are not shared")
	}
	if o := cached(t, snap("d", "vol", "hourly", "x")).(*longhorn.Snapshot); o.OwnerReferences[0].UID != "u1" {
		t.Fatal(o.OwnerReferences)
	}
	changed := owner()
	changed[0].UID = "u2"
	d := snap("d", "vol", "hourly", "x")
	d.OwnerReferences = changed
	if d = cached(t, d).(*longhorn.Snapshot); &d.OwnerReferences[0] == &a.OwnerReferences[0] || d.OwnerReferences[0].UID != "u2" {
		t.Errorf("an owner of another UID was merged: %v", d.OwnerReferences)
	}

	// What a controller changes is a copy: the cached objects keep theirs.
	c := a.DeepCopy()
	c.Labels["longhornvolume"] = "changed"
	c.Status.Children["z"] = true
	c.Finalizers = append(c.Finalizers, "other")
	if b.Labels["longhornvolume"] != "vol" || len(e.Status.Snapshots["a"].Children) != 1 || len(b.Finalizers) != 1 {
		t.Fatalf("a change to a copy reached the cache: %v %v %v", b.Labels, e.Status.Snapshots["a"].Children, b.Finalizers)
	}
	// Even an append to a cached object's finalizers (which a controller
	// must not do) would copy them.
	if cap(b.Finalizers) != 1 {
		t.Fatalf("a shared finalizer list has room to grow in place: %v", b.Finalizers[:cap(b.Finalizers)])
	}
}

// A label holding NUL (which Kubernetes refuses) cannot be confused with
// another map by its encoding; maps too large to be common are kept as
// they are.
func TestSharedLabelsKeepTheirContent(t *testing.T) {
	shared = newSharedPools()
	x := shareLabels(map[string]string{"a\x00b": "c"})
	y := shareLabels(map[string]string{"a": "b\x00c"})
	if x["a\x00b"] != "c" || y["a"] != "b\x00c" {
		t.Fatalf("maps with NUL were merged: %v %v", x, y)
	}
	big := map[string]string{}
	for i := 0; i <= maxSharedEntries; i++ {
		big[fmt.Sprint(i)] = "v"
	}
	if got := shareLabels(big); !sameMap(got, big) {
		t.Fatal("a large map was replaced")
	}
	if shareLabels(nil) != nil || shareChildren(nil) != nil {
		t.Fatal("nil became a map")
	}
}

// The pools keep at most poolLimit values each: a pool that is full starts
// over, and the maps handed out before stay as they were.
func TestSharedPoolsAreBounded(t *testing.T) {
	shared = newSharedPools()
	first := shareLabels(map[string]string{"n": "0"})
	for i := 1; i <= poolLimit; i++ {
		shareLabels(map[string]string{"n": fmt.Sprint(i)})
	}
	if n := len(shared.labels.items); n > poolLimit {
		t.Fatalf("the pool holds %d maps, more than %d", n, poolLimit)
	}
	again := shareLabels(map[string]string{"n": "0"})
	if sameMap(first, again) || first["n"] != "0" || again["n"] != "0" {
		t.Fatalf("after starting over: %v %v", first, again)
	}
}
