package volumeengine

import (
	"strings"
	"testing"
	"time"
)

// A panic in a purge is that purge's error: the engine goes on, and the
// next purge runs.
func TestAPanickingPurgeEndsInError(t *testing.T) {
	e, _ := newEngine(t, 1)
	e.mu.Lock()
	r := e.replicas[0].r
	e.replicas[0].r = nil // its purge panics
	e.mu.Unlock()
	wait := func() PurgeStatus {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st := e.PurgeStatus()
			if !st.IsPurging {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("purge still running: %+v", st)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e.StartPurge()
	if st := wait(); st.State != "error" || !strings.Contains(st.Error, "internal error") {
		t.Fatalf("purge status %+v, want an error saying an internal error happened", st)
	}
	e.mu.Lock()
	e.replicas[0].r = r
	e.mu.Unlock()
	e.StartPurge()
	if st := wait(); st.State != "complete" {
		t.Fatalf("the next purge: %+v, want complete", st)
	}
}
