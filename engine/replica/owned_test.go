package replica

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// Once a newer engine accepted its term, every request of the older one
// through its Owned is refused with ErrFenced and changes nothing: the
// data, the chain, the epoch and the size are as the newer engine left
// them. The newer engine's requests go through.
func TestAnOlderOwnersRequestsAreFencedAndChangeNothing(t *testing.T) {
	const size = 1 << 20
	r, err := Create(filepath.Join(t.TempDir(), "r"), size)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.AcceptTerm(1, "engine-a"); err != nil {
		t.Fatal(err)
	}
	older := r.AtTerm(1, "engine-a")
	data := make([]byte, size)
	_, _ = rand.Read(data)
	if _, err := older.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if err := older.CreateSnapshotWithID("s1", "id-1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if err := older.SetEpoch(5); err != nil {
		t.Fatal(err)
	}
	if err := r.AcceptTerm(2, "engine-b"); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		got := make([]byte, size)
		if _, err := r.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		list, err := r.Snapshots()
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("data %v, chain %+v, epoch %d, size %d", bytes.Equal(got, data), list, r.Epoch(), r.Size())
	}
	before := state()
	requests := map[string]func() error{
		"read":          func() error { _, err := older.ReadAt(make([]byte, 4096), 0); return err },
		"write":         func() error { _, err := older.WriteAt(make([]byte, 4096), 0); return err },
		"trim":          func() error { return older.TrimKeeping(0, size, nil) },
		"sync":          older.Sync,
		"set epoch":     func() error { return older.SetEpoch(9) },
		"snapshot":      func() error { return older.CreateSnapshotWithID("s2", "id-2", true, time.Now(), nil) },
		"mark removed":  func() error { return older.MarkRemoved("s1") },
		"revert":        func() error { return older.Revert("s1") },
		"purge":         func() error { _, err := older.Purge(); return err },
		"grow":          func() error { return older.Grow(2 * size) },
		"list":          func() error { _, err := older.Snapshots(); return err },
		"open snapshot": func() error { _, err := older.OpenSnapshotRange("s1", 0, -1); return err },
		"changed":       func() error { _, _, err := older.ChangedBlocksByID("", "id-1"); return err },
		"written":       func() error { _, err := older.Written(); return err },
	}
	for name, req := range requests {
		if err := req(); !errors.Is(err, ErrFenced) {
			t.Errorf("%s of the older engine: want ErrFenced, got %v", name, err)
		}
	}
	if after := state(); after != before {
		t.Fatalf("the fenced requests changed the replica:\nbefore %s\nafter  %s", before, after)
	}
	newer := r.AtTerm(2, "engine-b")
	if _, err := newer.WriteAt(make([]byte, 4096), 0); err != nil {
		t.Fatalf("the newer engine's write: %v", err)
	}
	if err := newer.SetEpoch(6); err != nil || r.Epoch() != 6 {
		t.Fatalf("the newer engine's epoch: %v, epoch %d", err, r.Epoch())
	}
	if err := newer.MarkRemoved("s1"); err != nil {
		t.Fatal(err)
	}
	if purged, err := newer.Purge(); err != nil || len(purged) != 1 {
		t.Fatalf("the newer engine's purge: %v, %v", purged, err)
	}
	if err := newer.Grow(2 * size); err != nil || r.Size() != 2*size {
		t.Fatalf("the newer engine's grow: %v, size %d", err, r.Size())
	}
}
