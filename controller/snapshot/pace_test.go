package snapshot

import (
	"testing"
	"time"
)

// A volume's engine changes are acted on in rounds: the first change after
// a quiet pace after the gathering window, changes while a round is due
// with that round, changes after it when the pace since it ends; other
// volumes have rounds of their own, and a clock set back holds nothing
// longer than a pace.
func TestEngineChangesAreWrittenInRoundsPerPace(t *testing.T) {
	var r statusRounds
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	if w := r.wait("vol", now); w != statusGather {
		t.Fatalf("a first change waits %s, want the gathering window", w)
	}
	if w := r.wait("vol", now.Add(100*time.Millisecond)); w != statusGather-100*time.Millisecond {
		t.Fatalf("a change while the round is due waits %s, want that round", w)
	}
	if w := r.wait("other", now.Add(100*time.Millisecond)); w != statusGather {
		t.Fatalf("another volume's change waits %s", w)
	}
	round := now.Add(statusGather)
	if w := r.wait("vol", round.Add(time.Second)); w != statusPace-time.Second {
		t.Fatalf("a change 1s after a round waits %s, want the rest of the pace", w)
	}
	next := round.Add(statusPace)
	if w := r.wait("vol", next.Add(statusPace)); w != statusGather {
		t.Fatalf("a change a pace after the last round waits %s, want the gathering window", w)
	}
	if w := r.wait("vol", now.Add(-time.Hour)); w != statusPace {
		t.Fatalf("with the clock set back the wait is %s, want at most the pace", w)
	}
}
