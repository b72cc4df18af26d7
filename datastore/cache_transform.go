package datastore

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// cacheTransform is what the informers do to an object before they cache
// it: drop its managedFields (nothing here reads them, and an update sent
// without them keeps the apiserver's), and share the parts most objects
// repeat with the objects already cached: label maps, finalizers, owner
// references and the namespace; for Snapshots and Engines also the
// snapshots' labels and children, and a Snapshot's volume and owner
// node. A snapshot carries the same few labels as
// its siblings four times over (its volume label, the labels it was created
// with, their copy in its status and in its engine's status), and a small
// Go map costs about 300 bytes: with 30 snapshots a volume the repeats were
// half of what the caches held (BenchmarkCachedSnapshotMemory).
//
// Cached objects are read-only, as client-go asks of every informer cache:
// whoever changes one changes a DeepCopy, which copies what is shared (and
// shared slices are clipped, so even an append to one copies it).
func cacheTransform(obj any) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil // a tombstone
	}
	m.SetManagedFields(nil)
	m.SetNamespace(shared.strings.share(m.GetNamespace(), m.GetNamespace()))
	if l := m.GetLabels(); l != nil {
		m.SetLabels(shareLabels(l))
	}
	if f := m.GetFinalizers(); len(f) > 0 {
		m.SetFinalizers(shared.finalizers.share(strings.Join(f, "\x00"), slices.Clip(f)))
	}
	if o := m.GetOwnerReferences(); len(o) > 0 {
		m.SetOwnerReferences(shared.owners.share(ownersKey(o), slices.Clip(o)))
	}
	switch o := obj.(type) {
	case *longhorn.Snapshot:
		o.Spec.Volume = shared.strings.share(o.Spec.Volume, o.Spec.Volume)
		o.Spec.Labels = shareLabels(o.Spec.Labels)
		o.Status.Labels = shareLabels(o.Status.Labels)
		o.Status.OwnerID = shared.strings.share(o.Status.OwnerID, o.Status.OwnerID)
		o.Status.Children = shareChildren(o.Status.Children)
	case *longhorn.Engine:
		for _, info := range o.Status.Snapshots {
			if info != nil {
				info.Labels = shareLabels(info.Labels)
				info.Children = shareChildren(info.Children)
			}
		}
	}
	return obj, nil
}

// shared holds one copy of each value the caches hold many of. Each pool
// keeps at most poolLimit values and starts over when full (the objects
// keep what they have), so what it keeps alive beyond the caches is
// bounded.
var shared = newSharedPools()

const poolLimit = 1 << 14

type sharedPools struct {
	strings    *pool[string]
	labels     *pool[map[string]string]
	finalizers *pool[[]string]
	owners     *pool[[]metav1.OwnerReference]
	children   *pool[map[string]bool]
}

func newSharedPools() sharedPools {
	return sharedPools{strings: newPool[string](), labels: newPool[map[string]string](),
		finalizers: newPool[[]string](), owners: newPool[[]metav1.OwnerReference](), children: newPool[map[string]bool]()}
}

type pool[T any] struct {
	mu    sync.Mutex
	items map[string]T
}

func newPool[T any]() *pool[T] { return &pool[T]{items: map[string]T{}} }

// share returns the pool's value for key if it has one, else v, which the
// pool then keeps.
func (p *pool[T]) share(key string, v T) T {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.items[key]; ok {
		return s
	}
	if len(p.items) >= poolLimit {
		clear(p.items)
	}
	p.items[key] = v
	return v
}

// Label maps larger than this are rare and kept as they are.
const (
	maxSharedEntries = 16
	maxSharedBytes   = 1024
)

// shareLabels returns a map equal to m, shared with the cached objects
// that have the same. nil stays nil.
func shareLabels(m map[string]string) map[string]string {
	if m == nil || len(m) > maxSharedEntries {
		return m
	}
	key, ok := labelsKey(m)
	if !ok {
		return m
	}
	return shared.labels.share(key, m)
}

// labelsKey encodes a map's content: its keys in order, each followed by
// its value, each ended by NUL (which a label cannot hold: a map holding
// one is not shared).
func labelsKey(m map[string]string) (string, bool) {
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return "", false
		}
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	if size > maxSharedBytes {
		return "", false
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return b.String(), true
}

// ownersKey encodes owner references: every field, NUL-ended.
func ownersKey(refs []metav1.OwnerReference) string {
	var b strings.Builder
	flag := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatBool(*p)
	}
	for _, r := range refs {
		for _, f := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID), flag(r.Controller), flag(r.BlockOwnerDeletion)} {
			b.WriteString(f)
			b.WriteByte(0)
		}
	}
	return b.String()
}

// shareChildren returns a map equal to m, shared with the cached objects
// that have the same: a snapshot's children are listed in its status and
// in its engine's. nil stays nil.
func shareChildren(m map[string]bool) map[string]bool {
	if m == nil || len(m) > maxSharedEntries {
		return m
	}
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if !v || strings.IndexByte(k, 0) >= 0 {
			return m
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return shared.children.share(strings.Join(keys, "\x00"), m)
}
