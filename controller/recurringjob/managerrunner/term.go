package managerrunner

import (
	"context"
	"sync"
)

// leaderTerms lets the runner wait for the end of a leadership term.
// client-go starts OnStartedLeading in a goroutine of its own and returns
// from Run without waiting for it: without this, the next term could
// begin (and another manager take the Lease) while the last term's runs
// are still stopping.
type leaderTerms struct {
	mu      sync.Mutex
	current chan struct{}
}

// begin starts a term for the leader context ctx; it returns false, and
// no term, when ctx has already ended (the elector returned before the
// callback ran). end must be called when the term's work has stopped.
func (l *leaderTerms) begin(ctx context.Context) (ok bool, end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ctx.Err() != nil {
		return false, func() {}
	}
	done := make(chan struct{})
	l.current = done
	return true, func() { close(done) }
}

// wait returns once the term begun last, if any, has ended. It is called
// after the elector returned, when the leader context has ended: a term
// not begun by then never begins.
func (l *leaderTerms) wait() {
	l.mu.Lock()
	done := l.current
	l.current = nil
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}
