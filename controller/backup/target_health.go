package backup

import (
	"sync"
	"time"
)

// TargetHealth is what the last polls of the backup target found, for
// the metrics: whether this node polls it, whether the last poll could
// read it, and when a poll last could.
type TargetHealth struct {
	// Polling is true on the one node that polls the target (the first
	// Ready node by name) while a target is set.
	Polling bool
	// Target is the backup-target setting polled.
	Target string
	// Reachable tells whether the last poll could read the target.
	Reachable bool
	// LastSuccess is when a poll last read the target; zero when none
	// has since this manager started.
	LastSuccess time.Time
}

// targetHealth guards the TargetHealth the sync updates and the metrics
// read.
type targetHealth struct {
	mu sync.Mutex
	h  TargetHealth
}

// Health is what the last poll of the backup target found.
func (c *TargetController) Health() TargetHealth {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.h
}

// notPolling records that this node does not poll the target (not the
// leader, or no target set).
func (c *TargetController) notPolling() {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	c.health.h = TargetHealth{}
}

// polled records the result of one poll of target.
func (c *TargetController) polled(target string, reachable bool, now time.Time) {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	if c.health.h.Target != target {
		c.health.h = TargetHealth{}
	}
	c.health.h.Polling, c.health.h.Target, c.health.h.Reachable = true, target, reachable
	if reachable {
		c.health.h.LastSuccess = now
	}
}
