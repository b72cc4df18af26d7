package snapshot

import (
	"sync"
	"time"
)

// statusPace is the least time between two rounds of the status writes a
// volume's engine changes ask for: Longhorn's engine poll. A burst of
// changes (a manager's start taking the snapshots made while it was down,
// a job deleting a volume's old snapshots) is written in one round per
// pace, each Snapshot object with the state it has at the end of it: a
// snapshot whose child comes within the round is first written with that
// child, not once without it and once with it.
const statusPace = 5 * time.Second

// statusGather is how long a change after a quiet pace waits for the
// changes that come with it.
const statusGather = 250 * time.Millisecond

// statusRounds paces, per volume, the syncs its engine's changes ask for.
// It holds one time per volume whose engine changed on this node.
type statusRounds struct {
	mu   sync.Mutex
	next map[string]time.Time
}

// wait is how long from now the syncs a change of volume's engine asks
// for wait: until the round already due, when one is; else the rest of
// the pace since the last round; else the gathering window. It is wall
// time, as the workqueue's delays are, and never more than a pace (a
// clock set back does not hold the syncs).
func (r *statusRounds) wait(volume string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = map[string]time.Time{}
	}
	at := now.Add(statusGather)
	if last, ok := r.next[volume]; ok {
		switch {
		case last.After(now):
			at = last
		case now.Before(last.Add(statusPace)):
			at = last.Add(statusPace)
		}
	}
	if at.After(now.Add(statusPace)) {
		at = now.Add(statusPace)
	}
	r.next[volume] = at
	return at.Sub(now)
}
