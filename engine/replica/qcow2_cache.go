package replica

import (
	"container/list"
	"sync"
)

// clusterCache keeps the most recently used clusters of a qcow2 file (L2
// tables, decompressed clusters) by their offset in the file, at most max
// of them. It is safe for concurrent use; two readers missing the same
// cluster at once both load it, which costs a read and nothing else.
type clusterCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of *cachedCluster, most recent first
	byOff map[int64]*list.Element
}

type cachedCluster struct {
	off  int64
	data []byte
}

// newClusterCache returns a cache that holds about budget bytes of
// clusters of clusterSize bytes, and at least two clusters.
func newClusterCache(budget, clusterSize int64) *clusterCache {
	return &clusterCache{max: int(max(2, budget/clusterSize)), order: list.New(), byOff: map[int64]*list.Element{}}
}

// get returns the cluster at off, if the cache holds it. The bytes are
// shared: callers only read them.
func (c *clusterCache) get(off int64) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byOff[off]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cachedCluster).data, true
}

// add keeps data as the cluster at off, dropping the least recently used
// cluster when the cache is full.
func (c *clusterCache) add(off int64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byOff[off]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byOff[off] = c.order.PushFront(&cachedCluster{off: off, data: data})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byOff, last.Value.(*cachedCluster).off)
	}
}
