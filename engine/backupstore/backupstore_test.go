package backupstore

import (
	"crypto/sha256"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/internal/testfs"
)

const volSize = 32 << 20

func newVolume(t testing.TB, dir string) *replica.Replica {
	t.Helper()
	r, err := replica.Create(filepath.Join(dir, "replica"), volSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func random(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func checksum(t testing.TB, r interface {
	ReadAt([]byte, int64) (int, error)
}) [32]byte {
	t.Helper()
	b := make([]byte, volSize)
	if _, err := r.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func snapshotView(t testing.TB, r *replica.Replica, name string) *replica.SnapshotView {
	t.Helper()
	v, err := r.OpenSnapshot(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}

func newStore(t testing.TB) (*Store, string) {
	t.Helper()
	root := t.TempDir()
	s, err := Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// restoreInto restores a backup into a fresh replica and returns its checksum.
func restoreInto(t *testing.T, s *Store, volume, backup string) [32]byte {
	t.Helper()
	r := newVolume(t, t.TempDir())
	if _, err := s.Restore(volume, backup, r, nil); err != nil {
		t.Fatal(err)
	}
	return checksum(t, r)
}

func TestBackupRestoreAndIncremental(t *testing.T) {
	s, root := newStore(t)
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(1, 10<<20), 0)
	r.WriteAt(random(2, 1<<20), 20<<20)
	if err := r.CreateSnapshot("s1", true, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	v1 := snapshotView(t, r, "s1")
	b1, st1, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: v1.ID(), Source: v1, Labels: map[string]string{"RecurringJob": "daily"}})
	if err != nil {
		t.Fatal(err)
	}
	// 10 MiB and 1 MiB of data: 6 blocks of 2 MiB; the empty rest is skipped.
	if len(b1.Blocks) != 6 || st1.BlocksUploaded != 6 || b1.Labels["RecurringJob"] != "daily" {
		t.Fatalf("first backup: %d blocks, %+v", len(b1.Blocks), st1)
	}
	if restoreInto(t, s, "vol", b1.Name) != checksum(t, v1) {
		t.Fatal("the restored volume differs from the snapshot")
	}

	// Change about 1% of the volume, then back up incrementally.
	r.WriteAt(random(3, 300<<10), 4<<20+12345)
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
	if st2.BytesRead > 2*BlockSize || st2.BlocksUploaded > 2 || st2.BlocksReused < 5 {
		t.Fatalf("incremental backup read %d bytes and uploaded %d blocks (%+v)", st2.BytesRead, st2.BlocksUploaded, st2)
	}
	t.Logf("incremental backup after changing 1%% of %d MiB: read %d KiB, uploaded %d KiB", volSize>>20, st2.BytesRead>>10, st2.BytesUploaded>>10)
	if restoreInto(t, s, "vol", b2.Name) != checksum(t, v2) {
		t.Fatal("the incremental backup does not restore to its snapshot")
	}

	list, err := s.List("vol")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v, %v", list, err)
	}
	l, err := s.Scan()
	if err != nil || len(l.Volumes) != 1 || l.Volumes[0].LastBackupName != b2.Name || l.Volumes[0].Size != volSize {
		t.Fatalf("scan: %+v, %v", l, err)
	}

	// Deleting the first backup frees only the blocks the second lacks.
	if err := s.Delete("vol", b1.Name); err != nil {
		t.Fatal(err)
	}
	if restoreInto(t, s, "vol", b2.Name) != checksum(t, v2) {
		t.Fatal("deleting one backup broke another")
	}
	if n := countBlocks(t, root); n != len(b2.Blocks) {
		t.Fatalf("%d blocks stored, want the %d the remaining backup uses", n, len(b2.Blocks))
	}
	if err := s.Delete("vol", b2.Name); err != nil {
		t.Fatal(err)
	}
	if n := countBlocks(t, root); n != 0 {
		t.Fatalf("%d blocks left after deleting every backup", n)
	}
	if err := s.Delete("vol", b2.Name); !errors.Is(err, ErrNotExist) {
		t.Fatalf("deleting a missing backup: %v", err)
	}
}

func countBlocks(t *testing.T, root string) int {
	t.Helper()
	n := 0
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".blk") {
			n++
		}
		return nil
	})
	return n
}

// failingDriver fails every write after the first okWrites.
type failingDriver struct {
	Driver
	mu       sync.Mutex
	okWrites int
}

var errTargetDown = errors.New("backup target unreachable")

func (d *failingDriver) Write(key string, data []byte) error {
	d.mu.Lock()
	if d.okWrites <= 0 {
		d.mu.Unlock()
		return errTargetDown
	}
	d.okWrites--
	d.mu.Unlock()
	return d.Driver.Write(key, data)
}

func TestAFailedBackupStaysInvisibleAndARetrySucceeds(t *testing.T) {
	root := t.TempDir()
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(1, 12<<20), 0)
	r.CreateSnapshot("s1", true, time.Now(), nil)
	v := snapshotView(t, r, "s1")
	// Before the lock, before any block, mid-way, then with every block
	// stored but no config (each run writes its lock first).
	for _, okWrites := range []int{0, 1, 4, 4} {
		broken := NewStore("file://"+root, &failingDriver{Driver: &FileDriver{Root: root}, okWrites: okWrites})
		if _, _, err := broken.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v}); !errors.Is(err, errTargetDown) {
			t.Fatalf("after %d writes: want the target's error, got %v", okWrites, err)
		}
		s := NewStore("file://"+root, &FileDriver{Root: root})
		if list, _ := s.List("vol"); len(list) != 0 {
			t.Fatalf("a failed backup is visible: %+v", list)
		}
	}
	s := NewStore("file://"+root, &FileDriver{Root: root})
	b, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v})
	if err != nil {
		t.Fatal(err)
	}
	if st.BlocksReused != 6 || st.BlocksUploaded != 0 {
		t.Fatalf("the retry did not reuse the blocks already uploaded: %+v", st)
	}
	if restoreInto(t, s, "vol", b.Name) != checksum(t, v) {
		t.Fatal("the retried backup does not restore")
	}
}

func TestCorruptBlockIsDetectedOnRestore(t *testing.T) {
	s, root := newStore(t)
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(1, 1<<20), 0)
	r.CreateSnapshot("s1", true, time.Now(), nil)
	b, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: snapshotView(t, r, "s1")})
	if err != nil {
		t.Fatal(err)
	}
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".blk") {
			os.WriteFile(p, []byte("not gzip"), 0o644)
		}
		return nil
	})
	if _, err := s.Restore("vol", b.Name, newVolume(t, t.TempDir()), nil); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a corrupt block: %v", err)
	}
}

func TestTargetsAndURLs(t *testing.T) {
	for _, bad := range []string{"", "s3://@us-east-1/", "file://relative", "::"} {
		if _, err := Open(bad); err == nil {
			t.Errorf("target %q was accepted", bad)
		}
	}
	s, _ := newStore(t)
	u := s.URL("vol-1", "backup-abc")
	target, vol, backup, err := ParseURL(u)
	if err != nil || vol != "vol-1" || backup != "backup-abc" || target != s.target {
		t.Fatalf("ParseURL(%q) = %q %q %q %v", u, target, vol, backup, err)
	}
	if _, _, _, err := ParseURL("file:///x?volume=v"); err == nil {
		t.Fatal("a URL without a backup was accepted")
	}
}

func TestAFullTargetShowsNoBackupAndARetrySucceeds(t *testing.T) {
	root := testfs.Tmpfs(t, "1m")
	s, err := Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	r := newVolume(t, t.TempDir())
	r.WriteAt(random(5, 6<<20), 0)
	r.CreateSnapshot("s1", true, time.Now(), nil)
	v := snapshotView(t, r, "s1")
	if _, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v}); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("a backup to a full target: %v", err)
	}
	if list, _ := s.List("vol"); len(list) != 0 {
		t.Fatalf("a failed backup is visible: %+v", list)
	}
	testfs.Resize(t, root, "64m")
	b, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: v})
	if err != nil {
		t.Fatalf("the retry once there is room: %v", err)
	}
	if restoreInto(t, s, "vol", b.Name) != checksum(t, v) {
		t.Fatal("the retried backup does not restore")
	}
}
