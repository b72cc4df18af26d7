package volume

import (
	"testing"
	"time"
)

// An engine change is mirrored after the gathering window when the last
// read is a pace old, otherwise when the pace since that read ends; a
// stopped engine's record goes, so its next change waits only to gather.
func TestEngineChangesAreMirroredAtMostOncePerPace(t *testing.T) {
	m := newEngineMirrors()
	now := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	if w := m.wait("vol", now); w != engineMirrorGather {
		t.Fatalf("a never mirrored engine waits %s", w)
	}
	m.readAt("vol", now)
	if w := m.wait("vol", now.Add(time.Second)); w != engineMirrorPace-time.Second {
		t.Fatalf("a change 1s after a read waits %s, want the rest of the pace", w)
	}
	if w := m.wait("other", now.Add(time.Second)); w != engineMirrorGather {
		t.Fatalf("another volume's engine waits %s", w)
	}
	if w := m.wait("vol", now.Add(engineMirrorPace-engineMirrorGather/2)); w != engineMirrorGather {
		t.Fatalf("a change just before the pace ends waits %s, want the gathering window", w)
	}
	if w := m.wait("vol", now.Add(engineMirrorPace)); w != engineMirrorGather {
		t.Fatalf("a change a pace after the read waits %s", w)
	}
	if w := m.wait("vol", now.Add(-time.Hour)); w != engineMirrorPace {
		t.Fatalf("with the clock set back the wait is %s, want at most the pace", w)
	}
	m.forget("vol")
	if w := m.wait("vol", now.Add(time.Second)); w != engineMirrorGather {
		t.Fatalf("a restarted engine waits %s", w)
	}
}

// A change of the snapshot list alone is written at once when the list was
// last written a list pace ago (or never, or the engine started again),
// else when that pace ends.
func TestSnapshotListChangesAreWrittenAtMostOncePerListPace(t *testing.T) {
	m := newEngineMirrors()
	now := time.Date(2026, 11, 25, 1, 0, 0, 0, time.UTC)
	if w := m.listWait("vol", now); w != 0 {
		t.Fatalf("a list never written waits %s", w)
	}
	m.listedAt("vol", now)
	if w := m.listWait("vol", now.Add(time.Second)); w != engineListPace-time.Second {
		t.Fatalf("a list change 1s after the last waits %s, want the rest of the list pace", w)
	}
	if w := m.listWait("other", now.Add(time.Second)); w != 0 {
		t.Fatalf("another volume's list waits %s", w)
	}
	if w := m.listWait("vol", now.Add(engineListPace)); w != 0 {
		t.Fatalf("a list change a list pace after the last waits %s", w)
	}
	if w := m.listWait("vol", now.Add(-time.Hour)); w != engineListPace {
		t.Fatalf("with the clock set back the wait is %s, want at most the list pace", w)
	}
	m.forget("vol")
	if w := m.listWait("vol", now.Add(time.Second)); w != 0 {
		t.Fatalf("a restarted engine's list waits %s", w)
	}
}

// A change that comes with an ended backup the Engine status does not
// hold yet is mirrored at once; once written, the next changes are paced
// again; an engine started again (its count from 0) is a change too.
func TestABackupsEndIsMirroredAtOnce(t *testing.T) {
	m := newEngineMirrors()
	if m.backupEnded("vol", 0) {
		t.Fatal("an engine that ended no backup asks for a mirror at once")
	}
	if !m.backupEnded("vol", 1) {
		t.Fatal("an ended backup not yet mirrored waits for the pace")
	}
	m.finishedAt("vol", 1)
	if m.backupEnded("vol", 1) {
		t.Fatal("an ended backup already mirrored asks for a mirror at once again")
	}
	if m.backupEnded("other", 0) || !m.backupEnded("vol", 2) {
		t.Fatal("the counts are not kept per volume")
	}
	if !m.backupEnded("vol", 0) {
		t.Fatal("an engine started again is taken for the one before")
	}
	m.forget("vol")
	if m.backupEnded("vol", 0) {
		t.Fatal("a stopped engine's count is kept")
	}
}
