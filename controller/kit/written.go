package kit

import (
	"strconv"
	"sync"
)

// Written remembers, by queue key, the resourceVersion of the object a
// controller's own last write returned, so that a sync may go on from
// what it wrote instead of waiting for the informer to bring it back,
// and a later sync does not act on an older copy the informer still
// holds: that copy would only lead to a write refused with a conflict.
//
// The resourceVersions compared are etcd's revisions, integers that
// grow with every write; Kubernetes calls them opaque, so a version that
// does not parse as one is never taken for stale (the sync goes on and,
// at worst, meets a conflict and is retried). client-go's
// MutationCache rests on the same comparison.
type Written struct {
	mu sync.Mutex
	rv map[string]uint64
}

// Remember records that key's object was stored at resourceVersion.
func (w *Written) Remember(key, resourceVersion string) {
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rv == nil {
		w.rv = map[string]uint64{}
	}
	if v > w.rv[key] {
		w.rv[key] = v
	}
}

// Stale reports whether the cached copy of key's object, at
// resourceVersion, is older than what this controller wrote: the
// informer has yet to deliver the write, and its event queues the key
// again. A copy as new as the write, or newer, ends the memory of it.
func (w *Written) Stale(key, resourceVersion string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	written, ok := w.rv[key]
	if !ok {
		return false
	}
	v, err := strconv.ParseUint(resourceVersion, 10, 64)
	if err != nil || v >= written {
		delete(w.rv, key)
		return false
	}
	return true
}

// Forget drops what is remembered of key (its object is gone).
func (w *Written) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.rv, key)
}
