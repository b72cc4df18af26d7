package backupstore

import (
	"bytes"
	"sync/atomic"
	"testing"
)

// TestS3ServerKilledMidBackup: the backup fails with the reason, nothing
// of it is visible, and a retry once the server is back completes and
// restores byte for byte.
func TestS3ServerKilledMidBackup(t *testing.T) {
	tt := testTargets(t)["s3"]
	s := NewStore(tt.Target, tt.Driver)
	data := distinctBlocks(20, 4)
	src := &memSource{data: data, gateAt: 2 * BlockSize, gate: make(chan struct{})}
	var progressed atomic.Bool
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: src, Progress: func(p int) { progressed.Store(p > 0) }})
		done <- err
	}()
	eventuallyTrue(t, "the backup past its first block", progressed.Load)
	tt.S3.Stop(t)
	close(src.gate)
	err := <-done
	if err == nil {
		t.Fatal("a backup to a killed server completed")
	}
	t.Logf("backup to a killed server: %v", err)
	tt.S3.Start(t)
	if l, err := s.Scan(); err != nil || len(l.Backups["vol"]) != 0 || len(l.Invalid) != 0 {
		t.Fatalf("after the failed backup the target lists %+v, %v", l, err)
	}
	if _, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: data}}); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	got, err := restoreBytes(s, "vol", "b1", len(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restore of the retried backup: %v", err)
	}
}
