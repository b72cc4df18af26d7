package backupstore

import (
	"errors"
	"testing"
	"time"
)

// TestAPollOfAnUnchangedVolumeIsOneRequest: a volume whose backups
// listing has not changed since the last poll costs its listing alone;
// a new backup costs its config and the volume's record besides.
func TestAPollOfAnUnchangedVolumeIsOneRequest(t *testing.T) {
	_, root := newStore(t)
	d := &countingDriver{Driver: &FileDriver{Root: root}}
	s := NewStore("file://"+root+"/one-request", d)
	backup := func(name string) {
		t.Helper()
		if _, _, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: "s-" + name, Source: &memSource{data: blocksOf('a')}}); err != nil {
			t.Fatal(err)
		}
	}
	scan := func() *VolumeListing {
		t.Helper()
		d.calls.Store(0)
		l, err := s.ScanVolume("vol")
		if err != nil || l == nil {
			t.Fatalf("ScanVolume: %+v, %v", l, err)
		}
		return l
	}
	backup("b1")
	if l := scan(); d.calls.Load() != 3 || len(l.Backups) != 1 || l.Volume.LastBackupName != "b1" {
		t.Fatalf("first poll: %d requests, %+v; want 3 (listing, config, record)", d.calls.Load(), l)
	}
	if l := scan(); d.calls.Load() != 1 || l.Volume.LastBackupName != "b1" || l.Volume.Size != BlockSize {
		t.Fatalf("unchanged poll: %d requests, %+v; want 1 (the listing)", d.calls.Load(), l.Volume)
	}
	s.ForgetRecord("vol")
	if l := scan(); d.calls.Load() != 2 || l.Volume.LastBackupName != "b1" {
		t.Fatalf("poll after ForgetRecord: %d requests, %+v; want 2 (listing, record)", d.calls.Load(), l.Volume)
	}
	later := time.Now().Add(recordMaxAge + time.Minute)
	s.now = func() time.Time { return later }
	if scan(); d.calls.Load() != 2 {
		t.Fatalf("poll with the record older than %v: %d requests; want 2 (listing, record)", recordMaxAge, d.calls.Load())
	}
	if scan(); d.calls.Load() != 1 {
		t.Fatalf("the poll after: %d requests; want 1", d.calls.Load())
	}
	backup("b2")
	if l := scan(); d.calls.Load() != 3 || len(l.Backups) != 2 || l.Volume.LastBackupName != "b2" {
		t.Fatalf("poll after a backup: %d requests, %+v; want 3", d.calls.Load(), l.Volume)
	}
	if err := s.Delete("vol", "b2"); err != nil {
		t.Fatal(err)
	}
	if l := scan(); d.calls.Load() != 2 || len(l.Backups) != 1 || l.Volume.LastBackupName != "b1" {
		t.Fatalf("poll after a deletion: %d requests, %+v; want 2 (listing, record)", d.calls.Load(), l.Volume)
	}
}

// TestARecordReadBeforeItsBackupsConfigIsReadAgain: a backup writes its
// config, then the volume's record; a poll between the two must not keep
// the old record.
func TestARecordReadBeforeItsBackupsConfigIsReadAgain(t *testing.T) {
	s, _ := newStore(t)
	if _, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s", Source: &memSource{data: blocksOf('a')}}); err != nil {
		t.Fatal(err)
	}
	vol, err := s.Volume("vol")
	if err != nil {
		t.Fatal(err)
	}
	// b2's config is written; its record not yet.
	if err := s.writeJSON(backupCfgKey("vol", "b2"), BackupInfo{Name: "b2", VolumeName: "vol", VolumeSize: BlockSize, SnapshotName: "s2", CreatedAt: "2099-01-01T00:00:00Z", Compression: CompressionLZ4}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ScanVolume("vol"); err != nil || l.Volume.LastBackupName != "b1" {
		t.Fatalf("between the writes: %+v, %v", l, err)
	}
	vol.LastBackupName = "b2"
	if err := s.writeJSON(volumeCfgKey("vol"), vol); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ScanVolume("vol"); err != nil || l.Volume.LastBackupName != "b2" {
		t.Fatalf("after the record's write: %+v, %v; want the new record", l, err)
	}
}

// TestDeleteVolume removes every backup, block and the record, and gives
// up while a backup of the volume holds its lock.
func TestDeleteVolume(t *testing.T) {
	s, _ := newStore(t)
	for _, name := range []string{"b1", "b2"} {
		if _, _, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: "s-" + name, Source: &memSource{data: blocksOf('a', 'b')}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Backup(BackupRequest{Name: "other", Volume: "vol-2", Snapshot: "s", Source: &memSource{data: blocksOf('a')}}); err != nil {
		t.Fatal(err)
	}
	held, err := s.lock("vol", lockBackup)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteVolume("vol"); !errors.Is(err, ErrLocked) || n != 0 {
		t.Fatalf("DeleteVolume while a backup runs: %d, %v; want ErrLocked and nothing deleted", n, err)
	}
	held.release()
	if n, err := s.DeleteVolume("vol"); err != nil || n != 2 {
		t.Fatalf("DeleteVolume: %d, %v", n, err)
	}
	if l, err := s.ScanVolume("vol"); err != nil || l != nil {
		t.Fatalf("the volume after its deletion: %+v, %v; want nothing", l, err)
	}
	if blocks, err := s.blockFiles("vol"); err != nil || len(blocks) != 0 {
		t.Fatalf("blocks left: %v, %v", blocks, err)
	}
	if l, err := s.ScanVolume("vol-2"); err != nil || l == nil || len(l.Backups) != 1 {
		t.Fatalf("the other volume: %+v, %v", l, err)
	}
	restoreInto(t, s, "vol-2", "other")
}
