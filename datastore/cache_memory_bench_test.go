package datastore

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/scheme"
)

// cachedSnapshotFixtures are the objects the snapshot benchmark's informers
// hold for volumes × perVolume snapshots, as the apiserver sends them (JSON,
// managedFields included): each Snapshot with its volume label, finalizer,
// owner, the labels it was created with and a status mirroring the engine;
// each Engine listing its volume's chain and head.
func cachedSnapshotFixtures(volumes, perVolume int) (snapshots, engines [][]byte) {
	labels := map[string]string{"bench": "scale"}
	managed := []metav1.ManagedFieldsEntry{{Manager: "longhorn-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "longhorn.io/v1beta2", FieldsType: "FieldsV1", Time: &metav1.Time{Time: time.Unix(1e9, 0)},
		FieldsV1:    &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:children":{".":{},"f:x":{}},"f:creationTime":{},"f:labels":{".":{},"f:bench":{}},"f:ownerID":{},"f:parent":{},"f:readyToUse":{},"f:restoreSize":{},"f:size":{}}}`)},
		Subresource: "status"}}
	for v := 0; v < volumes; v++ {
		vol := fmt.Sprintf("vol-%04d", v)
		uid := types.UID(fmt.Sprintf("0b6e2a3c-8f7e-4d1a-9c2b-%012d", v))
		e := &longhorn.Engine{
			TypeMeta:   metav1.TypeMeta{APIVersion: "longhorn.io/v1beta2", Kind: "Engine"},
			ObjectMeta: metav1.ObjectMeta{Name: vol + "-e-0", Namespace: "longhorn-system", Labels: map[string]string{"longhornvolume": vol}, ManagedFields: managed},
		}
		e.Status.Snapshots = map[string]*longhorn.SnapshotInfo{}
		for s := 0; s < perVolume; s++ {
			name, parent, child := fmt.Sprintf("%s-s%02d", vol, s), fmt.Sprintf("%s-s%02d", vol, s-1), fmt.Sprintf("%s-s%02d", vol, s+1)
			if s == 0 {
				parent = ""
			}
			if s == perVolume-1 {
				child = "volume-head"
			}
			snap := &longhorn.Snapshot{
				TypeMeta: metav1.TypeMeta{APIVersion: "longhorn.io/v1beta2", Kind: "Snapshot"},
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "longhorn-system", UID: types.UID(fmt.Sprintf("7d0c4f7a-1c1e-4bb0-a7a5-%06d%06d", v, s)),
					ResourceVersion: fmt.Sprint(100000 + v*perVolume + s), Generation: 1, CreationTimestamp: metav1.Time{Time: time.Unix(1e9, 0)},
					Labels: map[string]string{"longhornvolume": vol}, Finalizers: []string{"longhorn.io"},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "longhorn.io/v1beta2", Kind: "Volume", Name: vol, UID: uid}},
					ManagedFields:   managed},
				Spec: longhorn.SnapshotSpec{Volume: vol, CreateSnapshot: true, Labels: labels},
				Status: longhorn.SnapshotStatus{Parent: parent, Children: map[string]bool{child: true}, UserCreated: true,
					CreationTime: "2026-11-25T10:00:00Z", Size: 4096, Labels: labels, OwnerID: "node-1", RestoreSize: 1 << 20, ReadyToUse: true},
			}
			raw, err := json.Marshal(snap)
			if err != nil {
				panic(err)
			}
			snapshots = append(snapshots, raw)
			e.Status.Snapshots[name] = &longhorn.SnapshotInfo{Name: name, Parent: parent, Children: map[string]bool{child: true},
				UserCreated: true, Created: "2026-11-25T10:00:00Z", Size: "4096", Labels: labels}
		}
		raw, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		engines = append(engines, raw)
	}
	return snapshots, engines
}

// BenchmarkCachedSnapshotMemory reports what the informer caches hold per
// snapshot (its Snapshot object and its entry in the Engine's status),
// decoded as the informers decode them and passed through their
// transform: bytes/snap is the live heap the objects keep after a
// collection, for 100 volumes × 30 snapshots.
func BenchmarkCachedSnapshotMemory(b *testing.B) {
	const volumes, perVolume = 100, 30
	snapshots, engines := cachedSnapshotFixtures(volumes, perVolume)
	decoder := serializer.NewCodecFactory(scheme.Scheme).UniversalDeserializer()
	live := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var perSnap float64
	for i := 0; i < b.N; i++ {
		held := make([]any, 0, len(snapshots)+len(engines))
		shared = newSharedPools() // as at the manager's start
		before := live()
		for _, raw := range append(append([][]byte{}, snapshots...), engines...) {
			obj, _, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			cached, err := cacheTransform(obj)
			if err != nil {
				b.Fatal(err)
			}
			held = append(held, cached)
		}
		perSnap = float64(live()-before) / float64(len(snapshots))
		runtime.KeepAlive(held)
	}
	b.ReportMetric(perSnap, "bytes/snap")
}
