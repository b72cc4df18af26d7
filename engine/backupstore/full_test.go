package backupstore

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A full backup stores every block again, present in the target or not:
// a block that rotted in the target (every backup sharing it then fails
// to restore) is whole again, for the backups before it too. Each backup
// records what it was: the volume's first is full, the next incremental,
// one asked full is full and counts what it uploaded again.
func TestAFullBackupUploadsEveryBlockAgainAndHealsARottedOne(t *testing.T) {
	s, root := newStore(t)
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(1, 6<<20), 0)
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	v1 := snapshotView(t, r, "s1")
	b1, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v1.ID(), Source: v1})
	if err != nil {
		t.Fatal(err)
	}
	if b1.Mode != ModeFull || b1.NewlyUploaded == 0 || b1.ReUploaded != 0 {
		t.Fatalf("the first backup: mode %q, newly %d, again %d; want full, all new", b1.Mode, b1.NewlyUploaded, b1.ReUploaded)
	}
	r.WriteAt(random(2, 4096), 1<<20)
	if err := r.CreateSnapshot("s2", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	v2 := snapshotView(t, r, "s2")
	changed, _, err := r.ChangedBlocksByID(v1.ID(), v2.ID())
	if err != nil {
		t.Fatal(err)
	}
	b2, st2, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s2", SnapshotID: v2.ID(), Source: v2, Changed: changed, ChangedSince: "s1", ChangedSinceID: v1.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if b2.Mode != ModeIncremental || st2.BlocksUploaded != 1 || b2.ReUploaded != 0 {
		t.Fatalf("the second backup: mode %q, %d blocks uploaded, again %d; want incremental, one", b2.Mode, st2.BlocksUploaded, b2.ReUploaded)
	}

	// Rot one block both backups share (the one at 4 MiB, unchanged).
	var shared string
	for _, ref := range b2.Blocks {
		if ref.Offset == 4<<20 {
			shared = ref.Checksum
		}
	}
	rotted := 0
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), shared) {
			rotted++
			os.WriteFile(p, []byte("rotted"), 0o644)
		}
		return nil
	})
	if rotted != 1 {
		t.Fatalf("found %d files of block %s", rotted, shared)
	}
	for _, b := range []*BackupInfo{b1, b2} {
		if _, err := s.Restore("vol", b.Name, newVolume(t, t.TempDir()), nil); err == nil {
			t.Fatalf("backup %s restored from a rotted block", b.Name)
		}
	}

	// An incremental backup of the same snapshot would share the rotted
	// block; a full one uploads it, and every other block, again.
	b3, st3, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s2", SnapshotID: v2.ID(), Source: v2, Full: true,
		Changed: changed, ChangedSince: "s1", ChangedSinceID: v1.ID()})
	if err != nil {
		t.Fatal(err)
	}
	if b3.Mode != ModeFull || st3.BlocksUploaded != len(b3.Blocks) || st3.BlocksReused != 0 || b3.ReUploaded == 0 || b3.NewlyUploaded != 0 {
		t.Fatalf("the full backup: mode %q, %d of %d blocks uploaded, %d reused, newly %d, again %d",
			b3.Mode, st3.BlocksUploaded, len(b3.Blocks), st3.BlocksReused, b3.NewlyUploaded, b3.ReUploaded)
	}
	for _, tc := range []struct {
		b    *BackupInfo
		want [32]byte
	}{{b1, checksum(t, v1)}, {b2, checksum(t, v2)}, {b3, checksum(t, v2)}} {
		if restoreInto(t, s, "vol", tc.b.Name) != tc.want {
			t.Fatalf("backup %s does not restore to its snapshot after the full backup", tc.b.Name)
		}
	}
	// The records say so after a read from the target too.
	got, err := s.Get("vol", b3.Name)
	if err != nil || got.Mode != ModeFull || got.ReUploaded != b3.ReUploaded {
		t.Fatalf("the full backup's record: %+v, %v", got, err)
	}
	if err := CheckMode("differential"); err == nil || !strings.Contains(err.Error(), "backupMode") {
		t.Errorf("an unknown mode: %v", err)
	}
}

// A backup is recorded full only when it uploaded every block. The
// volume's record in the target (which names its last backup) missing,
// a backup not asked full still reuses every block the target holds, a
// rotted one included: it is incremental, and says so, so that a failed
// drill's "next backup full" is not taken as done by it
// (datastore.NextBackupFull). With no block in the target to reuse, the
// same backup uploads every block and is full.
func TestABackupThatReusedBlocksIsNotRecordedFullWhenTheVolumeRecordIsMissing(t *testing.T) {
	s, _ := newStore(t)
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(3, 4<<20), 0)
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	v1 := snapshotView(t, r, "s1")
	b1, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v1.ID(), Source: v1})
	if err != nil || b1.Mode != ModeFull {
		t.Fatalf("the first backup: %+v, %v", b1, err)
	}
	if err := s.driver.Delete(volumeCfgKey("vol")); err != nil {
		t.Fatal(err)
	}
	b2, st2, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v1.ID(), Source: v1})
	if err != nil {
		t.Fatal(err)
	}
	if b2.Mode != ModeIncremental || st2.BlocksUploaded != 0 || st2.BlocksInTarget != len(b2.Blocks) {
		t.Fatalf("a backup that reused every block, the volume record missing: mode %q, %d uploaded, %d found in the target of %d; want incremental",
			b2.Mode, st2.BlocksUploaded, st2.BlocksInTarget, len(b2.Blocks))
	}
	if got, err := s.Get("vol", b2.Name); err != nil || got.Mode != ModeIncremental {
		t.Fatalf("its record in the target: %+v, %v", got, err)
	}

	// Another volume's first backup: nothing to reuse, every block
	// uploaded, full, though one block repeats within the snapshot.
	r2 := newVolume(t, t.TempDir())
	same := random(4, BlockSize)
	r2.WriteAt(same, 0)
	r2.WriteAt(same, BlockSize)
	if err := r2.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	w1 := snapshotView(t, r2, "s1")
	first, _, err := s.Backup(BackupRequest{Volume: "other", Snapshot: "s1", SnapshotID: w1.ID(), Source: w1})
	if err != nil || first.Mode != ModeFull {
		t.Fatalf("a volume's first backup, a block repeated in it: %+v, %v", first, err)
	}
}
