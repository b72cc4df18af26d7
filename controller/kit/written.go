package kit

import (
	"sync"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Written remembers, by queue key, the resourceVersion of the object a
// controller's own last write returned, so that a sync may go on from
// what it wrote instead of waiting for the informer to bring it back,
// and a later sync does not act on an older copy the informer still
// holds: that copy would only lead to a write refused with a conflict.
//
// Versions are compared as apimachinery compares them
// (resourceversion.CompareResourceVersion, the comparison the API's
// consistent reads promise for one resource); a version it cannot compare
// is never taken for stale (the sync goes on and, at worst, meets a
// conflict and is retried).
type Written struct {
	mu sync.Mutex
	rv map[string]string
}

// Remember records that key's object was stored at resourceVersion.
func (w *Written) Remember(key, resourceVersion string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if prev, ok := w.rv[key]; ok {
		if c, err := resourceversion.CompareResourceVersion(resourceVersion, prev); err == nil && c <= 0 {
			return
		}
	}
	if _, err := resourceversion.CompareResourceVersion(resourceVersion, resourceVersion); err != nil {
		return // not a version this can compare
	}
	if w.rv == nil {
		w.rv = map[string]string{}
	}
	w.rv[key] = resourceVersion
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
	c, err := resourceversion.CompareResourceVersion(resourceVersion, written)
	if err != nil || c >= 0 {
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
