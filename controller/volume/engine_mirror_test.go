package volume

import (
	"testing"
	"time"
)

// An engine change is mirrored at once after a quiet pace, otherwise when
// the pace since the last read of the engine ends; a stopped engine's
// record goes, so its next start is mirrored at once.
func TestEngineChangesAreMirroredAtMostOncePerPace(t *testing.T) {
	m := engineMirrors{seen: map[string]engineMirror{}, read: map[string]time.Time{}}
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	if w := m.wait("vol", now); w != 0 {
		t.Fatalf("a never mirrored engine waits %s", w)
	}
	m.readAt("vol", now)
	if w := m.wait("vol", now.Add(time.Second)); w != engineMirrorPace-time.Second {
		t.Fatalf("a change 1s after a read waits %s, want the rest of the pace", w)
	}
	if w := m.wait("other", now.Add(time.Second)); w != 0 {
		t.Fatalf("another volume's engine waits %s", w)
	}
	if w := m.wait("vol", now.Add(engineMirrorPace)); w != 0 {
		t.Fatalf("a change a pace after the read waits %s", w)
	}
	if w := m.wait("vol", now.Add(-time.Hour)); w != engineMirrorPace {
		t.Fatalf("with the clock set back the wait is %s, want at most the pace", w)
	}
	m.forget("vol")
	if w := m.wait("vol", now.Add(time.Second)); w != 0 {
		t.Fatalf("a restarted engine waits %s", w)
	}
}
