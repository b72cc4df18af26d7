package replica

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const testSize = 4 << 20 // 4 MiB: 1024 blocks

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func newReplica(t *testing.T) (*Replica, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "replica")
	r, err := Create(dir, testSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, dir
}

func fill(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func write(t *testing.T, r *Replica, off int64, p []byte) {
	t.Helper()
	if _, err := r.WriteAt(p, off); err != nil {
		t.Fatal(err)
	}
}

// image is the whole content a reader sees.
func image(t *testing.T, r io.ReaderAt) []byte {
	t.Helper()
	b := make([]byte, testSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func sum(b []byte) string { return fmt.Sprintf("%x", sha256.Sum256(b)) }

func snapshotImage(t *testing.T, r *Replica, name string) []byte {
	t.Helper()
	v, err := r.OpenSnapshot(name)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	return image(t, v)
}

func TestReadsAndWrites(t *testing.T) {
	r, _ := newReplica(t)
	if got := image(t, r); !bytes.Equal(got, make([]byte, testSize)) {
		t.Fatal("a new replica does not read as zeros")
	}
	want := make([]byte, testSize)
	// Aligned, unaligned, spanning and single-byte writes.
	for i, w := range []struct {
		off int64
		n   int
	}{{0, BlockSize}, {10, 5}, {BlockSize - 3, 10}, {3*BlockSize + 100, 3 * BlockSize}, {testSize - 1, 1}} {
		data := fill(int64(i), w.n)
		write(t, r, w.off, data)
		copy(want[w.off:], data)
	}
	if got := image(t, r); !bytes.Equal(got, want) {
		t.Fatal("reads differ from what was written")
	}
	if _, err := r.WriteAt(make([]byte, 2), testSize-1); err == nil {
		t.Fatal("a write past the end was accepted")
	}
}

func TestSnapshotsFreezeAndRevert(t *testing.T) {
	r, dir := newReplica(t)
	a := fill(1, testSize)
	write(t, r, 0, a)
	if err := r.CreateSnapshot("s1", true, t0, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	b := fill(2, 64*1024)
	write(t, r, 8192+7, b)
	want := append([]byte(nil), a...)
	copy(want[8192+7:], b)
	if !bytes.Equal(image(t, r), want) {
		t.Fatal("the head does not read the new data over the snapshot")
	}
	if !bytes.Equal(snapshotImage(t, r, "s1"), a) {
		t.Fatal("the snapshot changed after a write to the head")
	}
	if err := r.CreateSnapshot("s2", false, t0.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	list, err := r.Snapshots()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name+"<"+s.Parent)
	}
	if strings.Join(names, ",") != "s1<,s2<s1,volume-head<s2" {
		t.Fatalf("list %v", names)
	}
	if list[0].Size != testSize || !list[0].UserCreated || list[1].UserCreated || list[0].Labels["k"] != "v" || !reflect.DeepEqual(list[0].Children, []string{"s2"}) {
		t.Fatalf("snapshot details %+v", list[:2])
	}

	// The state survives a reopen.
	r.Close()
	r2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if !bytes.Equal(image(t, r2), want) {
		t.Fatal("the head changed across a reopen")
	}
	if err := r2.Revert("s1"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(image(t, r2), a) {
		t.Fatal("after a revert the volume does not read the snapshot")
	}
	list, _ = r2.Snapshots()
	if got := list[len(list)-1]; got.Parent != "s1" || got.Size != 0 {
		t.Fatalf("head after revert %+v", got)
	}
	if err := r2.Revert("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revert to a missing snapshot: %v", err)
	}
}

func TestSnapshotNames(t *testing.T) {
	r, _ := newReplica(t)
	for _, bad := range []string{"", "volume-head", "-x", "a b", strings.Repeat("a", 64)} {
		if err := r.CreateSnapshot(bad, true, t0, nil); err == nil {
			t.Errorf("name %q was accepted", bad)
		}
	}
	if err := r.CreateSnapshot("ok", true, t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.CreateSnapshot("ok", true, t0, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a duplicate name: %v", err)
	}
	if err := r.MarkRemoved("missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("removing a missing snapshot: %v", err)
	}
}

// Purge keeps what every remaining snapshot and the head read.
func TestPurgeKeepsWhatRemainingSnapshotsRead(t *testing.T) {
	r, _ := newReplica(t)
	images := map[string]string{}
	for i, name := range []string{"s1", "s2", "s3", "s4"} {
		write(t, r, int64(i*100)*BlockSize, fill(int64(10+i), 200*BlockSize))
		if err := r.CreateSnapshot(name, true, t0.Add(time.Duration(i)*time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		images[name] = sum(snapshotImage(t, r, name))
	}
	write(t, r, 50*BlockSize, fill(99, 10*BlockSize))
	head := sum(image(t, r))

	for _, name := range []string{"s2", "s4"} {
		if err := r.MarkRemoved(name); err != nil {
			t.Fatal(err)
		}
	}
	purged, err := r.Purge()
	if err != nil {
		t.Fatal(err)
	}
	// s2 merges into s3; s4, the head's parent, merges into the head.
	if !reflect.DeepEqual(purged, []string{"s2", "s4"}) {
		t.Fatalf("purged %v", purged)
	}
	if sum(image(t, r)) != head {
		t.Fatal("purge changed what the head reads")
	}
	for _, name := range []string{"s1", "s3"} {
		if sum(snapshotImage(t, r, name)) != images[name] {
			t.Fatalf("purge changed what %s reads", name)
		}
	}
	for _, name := range []string{"s2", "s4"} {
		if _, err := os.Stat(filepath.Join(r.dir, snapshotFile(name))); !os.IsNotExist(err) {
			t.Fatalf("the purged snapshot %s's file is still there", name)
		}
	}
	// A snapshot then, and a purge with nothing removed, change nothing.
	if err := r.CreateSnapshot("s5", true, t0.Add(time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if purged, err = r.Purge(); err != nil || len(purged) != 0 {
		t.Fatalf("second purge %v, %v", purged, err)
	}
	if sum(image(t, r)) != head {
		t.Fatal("the second purge changed what the head reads")
	}
}

// A crash after any step of a snapshot or a purge, then a reopen, leaves
// a replica that reads exactly the old state or exactly the new one.
func TestCrashDuringSnapshotOrPurge(t *testing.T) {
	ops := []struct {
		name  string
		steps []string
		run   func(r *Replica, after step) error
	}{
		{"snapshot", []string{"link", "new head", "commit"}, func(r *Replica, after step) error {
			return r.createSnapshot("s3", "id-s3", true, t0.Add(time.Hour), nil, after)
		}},
		{"purge", []string{"merge", "commit"}, func(r *Replica, after step) error {
			_, err := r.purge(after)
			return err
		}},
	}
	for _, op := range ops {
		for _, crashAt := range op.steps {
			t.Run(op.name+" crash after "+crashAt, func(t *testing.T) {
				r, dir := newReplica(t)
				write(t, r, 0, fill(1, 300*BlockSize))
				must(t, r.CreateSnapshot("s1", true, t0, nil))
				write(t, r, 100*BlockSize, fill(2, 300*BlockSize))
				must(t, r.CreateSnapshot("s2", true, t0.Add(time.Minute), nil))
				write(t, r, 250*BlockSize, fill(3, 100*BlockSize))
				must(t, r.MarkRemoved("s1"))
				s2 := sum(snapshotImage(t, r, "s2"))
				head := sum(image(t, r))

				err := op.run(r, func(s string) error {
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
					t.Fatal("the head reads differently after the crash")
				}
				if sum(snapshotImage(t, r2, "s2")) != s2 {
					t.Fatal("s2 reads differently after the crash")
				}
				// Whatever state it is in, the replica keeps working and a
				// write to the head never reaches a snapshot.
				write(t, r2, 0, fill(4, 400*BlockSize))
				if sum(snapshotImage(t, r2, "s2")) != s2 {
					t.Fatal("a write after the crash changed s2")
				}
				if _, err := r2.Purge(); err != nil {
					t.Fatal(err)
				}
				if sum(snapshotImage(t, r2, "s2")) != s2 {
					t.Fatal("a purge after the crash changed s2")
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
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestAClosedReplicaRefusesEverything(t *testing.T) {
	r, _ := newReplica(t)
	r.Close()
	checks := map[string]error{}
	_, checks["read"] = r.ReadAt(make([]byte, 1), 0)
	_, checks["write"] = r.WriteAt(make([]byte, 1), 0)
	checks["sync"] = r.Sync()
	checks["snapshot"] = r.CreateSnapshot("s", true, t0, nil)
	_, checks["list"] = r.Snapshots()
	checks["remove"] = r.MarkRemoved("s")
	_, checks["purge"] = r.Purge()
	checks["revert"] = r.Revert("s")
	_, checks["view"] = r.OpenSnapshot("s")
	for op, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s on a closed replica: %v", op, err)
		}
	}
}

func TestChangedBlocks(t *testing.T) {
	r, _ := newReplica(t)
	write(t, r, 0, fill(1, 10*BlockSize))
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	write(t, r, 100*BlockSize, fill(2, BlockSize))
	must(t, r.CreateSnapshot("s2", true, t0.Add(time.Minute), nil))
	changed, full, err := r.ChangedBlocks("s1", "s2")
	must(t, err)
	count := 0
	for _, c := range changed {
		if c {
			count++
		}
	}
	if full || count != 1 || !changed[100] {
		t.Fatalf("since s1: full %v, %d changed", full, count)
	}
	changed, full, err = r.ChangedBlocks("", "s2")
	must(t, err)
	count = 0
	for _, c := range changed {
		if c {
			count++
		}
	}
	if !full || count != 11 {
		t.Fatalf("from nothing: full %v, %d changed", full, count)
	}
	if _, _, err := r.ChangedBlocks("s1", "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing snapshot: %v", err)
	}
}

// TestSnapshotIDsSurviveReopenAndNeverRepeat: a name freed by a purge and
// taken again names another snapshot, with another ID, and the changed
// blocks since the old one are then the whole volume.
func TestSnapshotIDsSurviveReopenAndNeverRepeat(t *testing.T) {
	r, dir := newReplica(t)
	write(t, r, 0, fill(1, BlockSize))
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	write(t, r, 8*BlockSize, fill(2, BlockSize))
	must(t, r.CreateSnapshotWithID("y", "id-y", true, t0.Add(time.Minute), nil))
	id := func(name string) string {
		t.Helper()
		list, err := r.Snapshots()
		must(t, err)
		for _, s := range list {
			if s.Name == name {
				return s.ID
			}
		}
		t.Fatalf("no snapshot %s", name)
		return ""
	}
	old := id("s1")
	if old == "" || id("y") != "id-y" {
		t.Fatalf("IDs: s1 %q, y %q", old, id("y"))
	}
	must(t, r.MarkRemoved("s1"))
	_, err := r.Purge()
	must(t, err)
	must(t, r.CreateSnapshot("s1", true, t0.Add(2*time.Minute), nil))
	if id("s1") == old {
		t.Fatal("the new s1 has the ID of the purged one")
	}
	must(t, r.Close())
	r, err = Open(dir)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	if got := id("y"); got != "id-y" {
		t.Fatalf("after a reopen y has ID %q", got)
	}
	changed, full, err := r.ChangedBlocksByID(old, id("s1"))
	must(t, err)
	if !full || !changed[0] || !changed[8] {
		t.Fatalf("since the purged s1: full %v, block 0 %v, block 8 %v", full, changed[0], changed[8])
	}
	changed, full, err = r.ChangedBlocksByID("id-y", id("s1"))
	must(t, err)
	if full || changed[0] || changed[8] {
		t.Fatalf("since y: full %v, block 0 %v, block 8 %v", full, changed[0], changed[8])
	}
	if err := r.CreateSnapshotWithID("s2", "", true, t0, nil); err == nil {
		t.Fatal("an empty ID was accepted")
	}
}

// TestATruncatedLayerFailsAReadInsteadOfReturningOldBytes: a layer file
// cut short under a reader (a damaged disk, a copy that stopped) must fail
// the read: a buffer reused from the previous block would otherwise go
// into a backup or to the client as if it were the data.
func TestATruncatedLayerFailsAReadInsteadOfReturningOldBytes(t *testing.T) {
	r, dir := newReplica(t)
	write(t, r, 0, fill(1, 2*BlockSize))
	if err := r.CreateSnapshot("s1", true, t0, nil); err != nil {
		t.Fatal(err)
	}
	v, err := r.OpenSnapshot("s1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := os.Truncate(filepath.Join(dir, snapshotFile("s1")), BlockSize+100); err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0xee}, BlockSize)
	if _, err := v.ReadAt(buf, BlockSize); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("snapshot view read of a truncated layer: %v", err)
	}
	if _, err := r.ReadAt(buf, BlockSize); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("replica read of a truncated layer: %v", err)
	}
	// What the file still holds reads as before.
	if _, err := v.ReadAt(buf[:100], BlockSize); err != nil {
		t.Fatal(err)
	}
}

// TestAViewsAllocatedBlocksAreItsOwnSnapshots: a snapshot's name can be
// purged and taken by another while a view of the first is open (a
// backup running); the view's allocation map is the first one's.
func TestAViewsAllocatedBlocksAreItsOwnSnapshots(t *testing.T) {
	r, _ := newReplica(t)
	write(t, r, 0, fill(1, BlockSize))
	must(t, r.CreateSnapshot("s1", true, t0, nil))
	v, err := r.OpenSnapshot("s1")
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	write(t, r, 5*BlockSize, fill(2, BlockSize))
	must(t, r.MarkRemoved("s1"))
	if _, err := r.Purge(); err != nil {
		t.Fatal(err)
	}
	must(t, r.CreateSnapshot("s1", true, t0.Add(time.Minute), nil))

	allocated := v.Allocated()
	if len(allocated) != testSize/BlockSize || !allocated[0] || allocated[5] {
		t.Fatalf("the view's allocation: %d blocks, block 0 %v, block 5 %v; want block 0 alone", len(allocated), allocated[0], allocated[5])
	}
	byName, _, err := r.ChangedBlocks("", "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !byName[5] {
		t.Fatal("the new s1 should hold block 5: the test does not reuse the name")
	}
}
