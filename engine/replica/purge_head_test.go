package replica

import (
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// headParentReplica is a replica whose newest snapshot, s2, is removed:
// s1 (kept) <- s2 (removed) <- head, with blocks that only s2 holds,
// blocks both s2 and the head hold, and blocks only the head holds.
func headParentReplica(t *testing.T) (*Replica, string) {
	t.Helper()
	r, dir := newReplica(t)
	write(t, r, 0, fill(1, 300*BlockSize))
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	write(t, r, 100*BlockSize, fill(2, 300*BlockSize))
	must(t, r.CreateSnapshot("s2", true, t0.Add(time.Minute), nil))
	write(t, r, 250*BlockSize, fill(3, 100*BlockSize))
	// A write that covers part of a block the head does not hold yet.
	write(t, r, 700*BlockSize+100, fill(4, 10))
	must(t, r.MarkRemoved("s2"))
	return r, dir
}

// The newest snapshot, deleted, merges into the head: the head keeps its
// own blocks and gains the ones only the snapshot held, so the volume
// reads the same, and the snapshot and its file are gone.
func TestPurgeMergesTheHeadsRemovedParentIntoTheHead(t *testing.T) {
	r, dir := headParentReplica(t)
	head := sum(image(t, r))
	s1 := sum(snapshotImage(t, r, "s1"))

	purged, err := r.Purge()
	must(t, err)
	if !reflect.DeepEqual(purged, []string{"s2"}) {
		t.Fatalf("purged %v, want [s2]", purged)
	}
	if sum(image(t, r)) != head {
		t.Fatal("merging s2 into the head changed what the volume reads")
	}
	if sum(snapshotImage(t, r, "s1")) != s1 {
		t.Fatal("merging s2 into the head changed s1")
	}
	list, err := r.Snapshots()
	must(t, err)
	if len(list) != 2 || list[0].Name != "s1" || list[1].Name != HeadName || list[1].Parent != "s1" {
		t.Fatalf("snapshots after the purge: %+v", list)
	}
	if _, err := os.Stat(filepath.Join(dir, snapshotFile("s2"))); !os.IsNotExist(err) {
		t.Fatal("the merged snapshot's file is still there")
	}
	// Reopened, it reads the same; a write and a snapshot still work.
	r.Close()
	r2, err := Open(dir)
	must(t, err)
	defer r2.Close()
	if sum(image(t, r2)) != head {
		t.Fatal("reopened, the volume reads differently")
	}
	write(t, r2, 120*BlockSize, fill(5, 4*BlockSize))
	must(t, r2.CreateSnapshot("s3", true, t0.Add(time.Hour), nil))
	if sum(snapshotImage(t, r2, "s1")) != s1 {
		t.Fatal("s1 changed after a write and a snapshot")
	}
}

// A chain of removed snapshots under the head goes whole: s1 merges
// into s2, then s2 into the head; on a backing-less replica the head then
// has no parent.
func TestPurgeMergesAChainOfRemovedSnapshotsIntoTheHead(t *testing.T) {
	r, _ := headParentReplica(t)
	must(t, r.MarkRemoved("s1"))
	head := sum(image(t, r))
	purged, err := r.Purge()
	must(t, err)
	if !reflect.DeepEqual(purged, []string{"s1", "s2"}) {
		t.Fatalf("purged %v, want [s1 s2]", purged)
	}
	if sum(image(t, r)) != head {
		t.Fatal("the purge changed what the volume reads")
	}
	list, err := r.Snapshots()
	must(t, err)
	if len(list) != 1 || list[0].Name != HeadName || list[0].Parent != "" {
		t.Fatalf("snapshots after the purge: %+v", list)
	}
}

// A removed head parent that another snapshot also descends from (after a
// revert) cannot be merged into the head: it stays, and nothing changes.
func TestPurgeKeepsARemovedHeadParentWithAnotherChild(t *testing.T) {
	r, _ := newReplica(t)
	write(t, r, 0, fill(1, 100*BlockSize))
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	write(t, r, 0, fill(2, 50*BlockSize))
	must(t, r.CreateSnapshot("s2", true, t0.Add(time.Minute), nil))
	must(t, r.Revert("s1"))
	must(t, r.MarkRemoved("s1"))
	head, s2 := sum(image(t, r)), sum(snapshotImage(t, r, "s2"))
	purged, err := r.Purge()
	must(t, err)
	if len(purged) != 0 {
		t.Fatalf("purged %v", purged)
	}
	if sum(image(t, r)) != head || sum(snapshotImage(t, r, "s2")) != s2 {
		t.Fatal("the purge changed what something reads")
	}
}

// A crash after each step of merging the head's parent into the head,
// then a reopen, leaves a replica that reads exactly what it read, and a
// purge after it finishes the job and leaves no file behind.
func TestCrashDuringMergeIntoHead(t *testing.T) {
	for _, crashAt := range []string{"merge into head", "commit"} {
		t.Run("crash after "+crashAt, func(t *testing.T) {
			r, dir := headParentReplica(t)
			head := sum(image(t, r))
			s1 := sum(snapshotImage(t, r, "s1"))
			_, err := r.purge(func(s string) error {
				if s == crashAt {
					return crashError{s}
				}
				return nil
			})
			if !isCrash(err) {
				t.Fatalf("want the injected crash, got %v", err)
			}
			r.Close()
			r2, err := Open(dir)
			must(t, err)
			defer r2.Close()
			if sum(image(t, r2)) != head {
				t.Fatal("the volume reads differently after the crash")
			}
			if sum(snapshotImage(t, r2, "s1")) != s1 {
				t.Fatal("s1 reads differently after the crash")
			}
			if _, err := r2.Purge(); err != nil {
				t.Fatal(err)
			}
			if sum(image(t, r2)) != head || sum(snapshotImage(t, r2, "s1")) != s1 {
				t.Fatal("the purge after the crash changed what something reads")
			}
			if r2.HasSnapshot("s2") {
				t.Fatal("s2 is still there after the purge that followed the crash")
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if !r2.referenced()[e.Name()] {
					t.Errorf("file %s left behind", e.Name())
				}
			}
		})
	}
}

// Writes to the head while the purge merges its parent into it are
// neither lost nor overwritten by the snapshot's older blocks.
func TestMergeIntoHeadWithConcurrentWrites(t *testing.T) {
	for round := 0; round < 5; round++ {
		r, _ := headParentReplica(t)
		want := image(t, r)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				off := int64((i*37)%1000)*BlockSize + int64(i%3)*512
				p := fill(int64(100+i), 3*BlockSize/2)
				if _, err := r.WriteAt(p, off); err != nil {
					t.Error(err)
					return
				}
				copy(want[off:], p)
			}
		}()
		if _, err := r.Purge(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if r.HasSnapshot("s2") {
			t.Fatal("s2 was not merged")
		}
		if sum(image(t, r)) != sum(want) {
			t.Fatalf("round %d: the volume does not read what was written during the merge", round)
		}
	}
}
