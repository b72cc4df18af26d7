package backup

import (
	"sync"
	"time"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

// TargetHealth is what the last polls of the backup target found, for
// the metrics: whether this node polls it, whether the last poll could
// read it, and when a poll last could.
type TargetHealth struct {
	// Polling is true on the one node that polls the target (its
	// BackupTarget's owner) while it has a URL.
	Polling bool
	// Target is the backup-target setting polled.
	Target string
	// Reachable tells whether the last poll could read the target.
	Reachable bool
	// LastSuccess is when a poll last read the target; zero when none
	// has since this manager started.
	LastSuccess time.Time
}

// targetHealth guards the TargetHealth of each target, by name, that
// the syncs update and the metrics read.
type targetHealth struct {
	mu sync.Mutex
	h  map[string]TargetHealth
}

// Health is what the last poll of the default backup target found.
func (c *TargetController) Health() TargetHealth {
	return c.Healths()[datastore.DefaultBackupTargetName]
}

// Healths is what the last poll of each backup target this node polls
// found, by target name.
func (c *TargetController) Healths() map[string]TargetHealth {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	out := make(map[string]TargetHealth, len(c.health.h))
	for name, h := range c.health.h {
		out[name] = h
	}
	return out
}

// notPolling records that this node does not poll target (not its
// owner, or it has no URL).
func (c *TargetController) notPolling(target string) {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	delete(c.health.h, target)
}

// polled records the result of one poll of target (its URL).
func (c *TargetController) polled(name, target string, reachable bool, now time.Time) {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	if c.health.h == nil {
		c.health.h = map[string]TargetHealth{}
	}
	h := c.health.h[name]
	if h.Target != target {
		h = TargetHealth{}
	}
	h.Polling, h.Target, h.Reachable = true, target, reachable
	if reachable {
		h.LastSuccess = now
	}
	c.health.h[name] = h
}
