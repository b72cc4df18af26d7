package replica

import (
	"bytes"
	"testing"
	"time"
)

// viewedReplica is a replica of 4 MiB whose snapshot s holds 'S' over the
// whole volume, with an empty head over it, and a view of s open.
func viewedReplica(t *testing.T) (*Replica, *SnapshotView) {
	t.Helper()
	r, err := Create(t.TempDir(), 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	if _, err := r.WriteAt(bytes.Repeat([]byte{'S'}, 4<<20), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshot("s", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	v, err := r.OpenSnapshot("s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return r, v
}

func checkView(t *testing.T, v *SnapshotView, when string) {
	t.Helper()
	got := make([]byte, 4<<20)
	if _, err := v.ReadAt(got, 0); err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte{'S'}, 4<<20)) {
		t.Fatalf("%s: the open view of s no longer reads what s held (%d zero bytes)", when, bytes.Count(got, []byte{0}))
	}
}

// A snapshot marked removed while a view reads it (a backup of it that
// nothing held) is not punched by a trim until the view closes: the view
// reads what the snapshot held, and the trim gives back the head's blocks
// alone. Once the view is closed, the next trim gives the removed
// snapshot's blocks back as usual.
func TestTrimLeavesARemovedSnapshotAnOpenViewReads(t *testing.T) {
	r, v := viewedReplica(t)
	if _, err := r.WriteAt(bytes.Repeat([]byte{'h'}, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	if err := r.MarkRemoved("s"); err != nil {
		t.Fatal(err)
	}
	before := fileAllocated(t, r, snapshotFile("s"))
	if err := r.Trim(0, 4<<20); err != nil {
		t.Fatal(err)
	}
	checkView(t, v, "after a trim")
	if got := fileAllocated(t, r, snapshotFile("s")); got != before {
		t.Errorf("removed snapshot s holds %d bytes after the trim, %d before: a layer an open view reads was punched", got, before)
	}
	if got := headAllocated(t, r); got >= 64<<10 {
		t.Errorf("the head holds %d bytes after the trim: want its 64 KiB given back", got)
	}
	// The trimmed head reads the layer below it, s, like every replica
	// whose trim kept s.
	if got := readAll(t, r, 0, 64<<10); !bytes.Equal(got, bytes.Repeat([]byte{'S'}, 64<<10)) {
		t.Error("the head's trimmed blocks do not read s's data")
	}

	v.Close()
	if err := r.Trim(0, 4<<20); err != nil {
		t.Fatal(err)
	}
	if got := fileAllocated(t, r, snapshotFile("s")); got >= 64<<10 {
		t.Errorf("removed snapshot s holds %d bytes after a trim with no view open: want them given back", got)
	}
}

// A trim told to keep a snapshot (another replica of the volume has a
// view of it open) keeps it as if this replica had the view: every
// replica of the volume then reads the same.
func TestTrimKeepsTheSnapshotsItIsTold(t *testing.T) {
	r, v := viewedReplica(t)
	v.Close()
	if err := r.MarkRemoved("s"); err != nil {
		t.Fatal(err)
	}
	if got := r.ViewedSnapshots(); len(got) != 0 {
		t.Fatalf("ViewedSnapshots = %v with no view open", got)
	}
	before := fileAllocated(t, r, snapshotFile("s"))
	if err := r.TrimKeeping(0, 4<<20, []string{"s"}); err != nil {
		t.Fatal(err)
	}
	if got := fileAllocated(t, r, snapshotFile("s")); got != before {
		t.Errorf("removed snapshot s holds %d bytes after a trim told to keep it, %d before", got, before)
	}
	if got := readAll(t, r, 0, 4<<20); !bytes.Equal(got, bytes.Repeat([]byte{'S'}, 4<<20)) {
		t.Error("the volume does not read s's data after a trim told to keep s")
	}
}

// ViewedSnapshots names the snapshot of every open view and its
// ancestors (the layers the view reads), until the view closes.
func TestViewedSnapshotsFollowTheOpenViews(t *testing.T) {
	r, v := viewedReplica(t)
	if err := r.CreateSnapshot("t", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	w, err := r.OpenSnapshotRange("t", 0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ViewedSnapshots(); len(got) != 2 || got[0] != "s" || got[1] != "t" {
		t.Fatalf("ViewedSnapshots = %v, want [s t]", got)
	}
	w.Close()
	w.Close() // a second close changes nothing
	if got := r.ViewedSnapshots(); len(got) != 1 || got[0] != "s" {
		t.Fatalf("ViewedSnapshots = %v after t's view closed, want [s]", got)
	}
	v.Close()
	if got := r.ViewedSnapshots(); len(got) != 0 {
		t.Fatalf("ViewedSnapshots = %v with no view open", got)
	}
}

// A purge of a removed snapshot an open view reads does not change what
// the view reads: the merge only adds to the child blocks that read the
// same, and the snapshot's file, unlinked, stays whole on disk while the
// view has it open, through a later trim of the head too.
func TestPurgeLeavesWhatAnOpenViewReads(t *testing.T) {
	r, v := viewedReplica(t)
	if err := r.MarkRemoved("s"); err != nil {
		t.Fatal(err)
	}
	purged, err := r.Purge()
	if err != nil || len(purged) != 1 {
		t.Fatalf("Purge = %v, %v", purged, err)
	}
	checkView(t, v, "after the purge")
	if err := r.Trim(0, 4<<20); err != nil {
		t.Fatal(err)
	}
	checkView(t, v, "after the purge and a trim")
}
