package managerrunner

import (
	"context"
	"time"
)

// Fires first: a run waits to begin its work while due jobs wait in this
// term's queue. Every fire is one status write and every run at least two
// more (its event and its end); when many ticks fall due at once, runs
// that started at once would compete with the fires still waiting for the
// apiserver's writes, and the last ticks would be recorded late. So the
// fires are recorded first, then the runs go, each with its tick in
// status.active already. The wait is bounded, so a queue that never
// empties (jobs changed without pause) delays runs, never stops them.
const (
	firesFirstPoll    = 50 * time.Millisecond
	firesFirstMaxWait = 2 * time.Minute
)

// firesPending reports whether due jobs wait in this term's queue.
func (r *Runner) firesPending() bool {
	r.mu.Lock()
	base := r.base
	r.mu.Unlock()
	return base != nil && base.Queue.Len() > 0
}

// waitForFires returns once no due job waits in the queue, after
// firesFirstMaxWait, or when ctx ends.
func (r *Runner) waitForFires(ctx context.Context) {
	deadline := time.Now().Add(firesFirstMaxWait)
	for r.firesPending() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(firesFirstPoll):
		}
	}
}
