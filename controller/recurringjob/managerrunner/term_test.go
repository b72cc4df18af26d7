package managerrunner

import (
	"context"
	"testing"
	"time"
)

// TestLeaderTermIsWaitedFor: the runner does not compete for the Lease
// again until the last term's work has stopped, and a term whose leader
// context ended before it began never begins.
func TestLeaderTermIsWaitedFor(t *testing.T) {
	var terms leaderTerms
	ctx, cancel := context.WithCancel(context.Background())
	ok, end := terms.begin(ctx)
	if !ok {
		t.Fatal("a term with a live context did not begin")
	}
	cancel()
	waited := make(chan struct{})
	go func() { terms.wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("wait returned while the term's work was still stopping")
	case <-time.After(50 * time.Millisecond):
	}
	end()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not return once the term ended")
	}

	// The elector returned before its callback ran: wait does not block,
	// and the late callback finds its context ended and does nothing.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	terms.wait()
	if ok, _ := terms.begin(ctx2); ok {
		t.Fatal("a term began with an ended leader context")
	}
	terms.wait()
}
