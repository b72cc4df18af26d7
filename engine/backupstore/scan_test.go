package backupstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scanWithin fails the test if Scan does not return in time (a read that
// blocks for ever would otherwise hang the test binary).
func scanWithin(t *testing.T, s *Store, limit time.Duration) (*Listing, error) {
	t.Helper()
	type result struct {
		l   *Listing
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := s.Scan()
		done <- result{l, err}
	}()
	select {
	case r := <-done:
		return r.l, r.err
	case <-time.After(limit):
		t.Fatalf("Scan did not return within %v", limit)
		return nil, nil
	}
}

// TestAMissingVolumeRecordStillListsItsBackups: volume.cfg removed by
// hand, a lifecycle rule or a partial copy must not hide the volume's
// backups: a listing without them would have them taken for deleted.
func TestAMissingVolumeRecordStillListsItsBackups(t *testing.T) {
	s, root := newStore(t)
	for i, name := range []string{"b1", "b2"} {
		if _, _, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: "s" + name, Source: &memSource{data: blocksOf('a', byte('b'+i))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(root, "backupstore", "volumes", "vol", "volume.cfg")); err != nil {
		t.Fatal(err)
	}
	l, err := scanWithin(t, s, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Backups["vol"]; len(got) != 2 || got[0].Name != "b1" || got[1].Name != "b2" {
		t.Fatalf("backups listed with the volume record missing: %+v", got)
	}
	if len(l.RecordMissing) != 1 || l.RecordMissing[0] != "vol" {
		t.Fatalf("RecordMissing %v, want [vol]", l.RecordMissing)
	}
	if len(l.Volumes) != 1 || l.Volumes[0].Name != "vol" || l.Volumes[0].LastBackupName != "b2" || l.Volumes[0].Size != 2*BlockSize {
		t.Fatalf("the volume made from its backups: %+v", l.Volumes)
	}
	// A folder with neither a record nor a backup config (a first backup
	// storing its blocks) is not a volume yet.
	if err := os.MkdirAll(filepath.Join(root, "backupstore", "volumes", "new", "blocks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if l, err := scanWithin(t, s, 30*time.Second); err != nil || len(l.Volumes) != 1 || len(l.RecordMissing) != 1 {
		t.Fatalf("scan with a first backup in progress: %+v, %v", l, err)
	}
}

// TestATargetsBadEntriesAreReportedAndTheRestIsRead: what a file://
// target holds can be anything: a named pipe, a symlink to /dev/zero, a
// huge file, a stray README. Each is an invalid record or is passed over;
// none hangs the scan, exhausts memory or hides the good volume.
func TestATargetsBadEntriesAreReportedAndTheRestIsRead(t *testing.T) {
	s, root := newStore(t)
	if _, _, err := s.Backup(BackupRequest{Name: "good", Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a')}}); err != nil {
		t.Fatal(err)
	}
	vols := filepath.Join(root, "backupstore", "volumes")
	// A named pipe as a backup config, next to the good one.
	if err := syscall.Mkfifo(filepath.Join(vols, "vol", "backups", "backup_fifo.cfg"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A volume whose record is /dev/zero.
	if err := os.MkdirAll(filepath.Join(vols, "zero", "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(vols, "zero", "volume.cfg")); err != nil {
		t.Fatal(err)
	}
	// A volume whose backup config is 4 GiB (sparse: nothing is written).
	if err := os.MkdirAll(filepath.Join(vols, "huge", "backups"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vols, "huge", "volume.cfg"), []byte(`{"name":"huge","size":2097152}`), 0o644); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(vols, "huge", "backups", "backup_big.cfg")
	if f, err := os.Create(huge); err != nil {
		t.Fatal(err)
	} else if err := f.Truncate(4 << 30); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	// A stray file among the volumes.
	if err := os.WriteFile(filepath.Join(vols, "README"), []byte("backups live here\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	l, err := scanWithin(t, s, 30*time.Second)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	if got := l.Backups["vol"]; len(got) != 1 || got[0].Name != "good" {
		t.Fatalf("the good volume's backups: %+v", got)
	}
	want := map[string]string{
		"vol/fifo": "not a regular file (a named pipe)",
		"zero/":    "not a regular file (a character device)",
		"huge/big": "more than the 1073741824 bytes",
	}
	for _, bad := range l.Invalid {
		k := bad.Volume + "/" + bad.Backup
		if w, ok := want[k]; !ok || !errors.Is(bad.Err, ErrInvalid) || !strings.Contains(bad.Err.Error(), w) {
			t.Errorf("invalid record %s: %v", k, bad.Err)
		}
		delete(want, k)
	}
	for k, w := range want {
		t.Errorf("no invalid record for %s (%s)", k, w)
	}
	for _, v := range l.Volumes {
		if v.Name == "README" {
			t.Errorf("the stray README listed as a volume")
		}
	}
}

// TestANamedPipeAsALockDoesNotHangTheVolume: a lock that cannot be read
// is an unreadable lock, stale after the expiry like any other; it does
// not block a backup or a deletion for ever.
func TestANamedPipeAsALockDoesNotHangTheVolume(t *testing.T) {
	s, root := newStore(t)
	s.lockRefresh, s.lockExpiry, s.lockPoll = 20*time.Millisecond, 300*time.Millisecond, 10*time.Millisecond
	if _, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a')}}); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(root, "backupstore", "volumes", "vol", "locks", "backup-pipe.lck")
	if err := os.MkdirAll(filepath.Dir(fifo), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Backup(BackupRequest{Name: "b2", Volume: "vol", Snapshot: "s2", Source: &memSource{data: blocksOf('b')}})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("backup beside a named pipe lock: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a backup hung on a named pipe in the volume's locks")
	}
	if err := s.Delete("vol", "b1"); errors.Is(err, ErrLocked) {
		time.Sleep(s.lockExpiry)
		err = s.Delete("vol", "b1")
		if err != nil {
			t.Fatalf("deletion after the unreadable lock went stale: %v", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(fifo); !os.IsNotExist(err) {
		t.Fatalf("the unreadable lock is still there: %v", err)
	}
}

// TestAStalledFileReadFailsAtItsDeadline: a file system that does not
// answer (a hard NFS mount that lost its server) fails the read after
// the driver's timeout, saying so, instead of blocking its caller.
func TestAStalledFileReadFailsAtItsDeadline(t *testing.T) {
	root := t.TempDir()
	release := make(chan struct{})
	defer close(release)
	d := &FileDriver{Root: root, Timeout: 50 * time.Millisecond, readHook: func(string) { <-release }}
	mustWrite(t, d, "backupstore/volumes/vol/volume.cfg", []byte(`{"name":"vol"}`))
	if _, err := d.Read("backupstore/volumes/vol/volume.cfg", maxRecordSize); !errors.Is(err, errFileTimeout) {
		t.Fatalf("a stalled read: %v, want the file system's timeout", err)
	}
}

// TestATargetWhoseRootIsAFileCannotBeRead: a stray file inside a target
// is passed over, but a target that is itself a file is unreachable, not
// an empty target.
func TestATargetWhoseRootIsAFileCannotBeRead(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-folder")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open("file://" + file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scanWithin(t, s, 30*time.Second); err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Fatalf("scan of a target that is a file: %v", err)
	}
}
