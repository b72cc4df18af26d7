package backupstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/testtime"
)

// TestStoreConformance runs the same suite on every kind of target
// (file:// and s3:// on a real S3 server): full and incremental backups
// restored byte for byte, deletion, dedupe, concurrent backups of several
// volumes, a backup and a deletion of one volume at once, and listing.
func TestStoreConformance(t *testing.T) {
	for name, tt := range testTargets(t) {
		t.Run(name, func(t *testing.T) {
			open := func() *Store {
				s := NewStore(tt.Target, tt.Driver)
				s.lockPoll = 10 * time.Millisecond
				return s
			}
			t.Run("full, incremental, dedupe and delete", func(t *testing.T) { conformFullIncrementalDelete(t, open()) })
			t.Run("concurrent volumes", func(t *testing.T) { conformConcurrentVolumes(t, open) })
			t.Run("backup and delete at once", func(t *testing.T) { conformBackupBesideDelete(t, open(), open()) })
		})
	}
}

func mustRestore(t *testing.T, s *Store, volume, backup string, want []byte) {
	t.Helper()
	got, err := restoreBytes(s, volume, backup, len(want))
	if err != nil {
		t.Fatalf("restore %s of %s: %v", backup, volume, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("restore %s of %s reads other bytes than were backed up", backup, volume)
	}
}

// distinctBlocks is n blocks, each half random and half text, no two alike.
func distinctBlocks(seed int64, n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, halfRandom(seed+int64(i), BlockSize)...)
	}
	return b
}

func conformFullIncrementalDelete(t *testing.T, s *Store) {
	data := distinctBlocks(1, 6)
	copy(data[4*BlockSize:], make([]byte, BlockSize)) // a hole: not stored
	b1, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", SnapshotID: "id1", Source: &memSource{data: data}})
	if err != nil {
		t.Fatal(err)
	}
	if len(b1.Blocks) != 5 || st.BlocksUploaded != 5 {
		t.Fatalf("full backup: %d blocks, %+v", len(b1.Blocks), st)
	}
	mustRestore(t, s, "vol", b1.Name, data)

	// Incremental: block 1 changed, and the changed map says so.
	next := bytes.Clone(data)
	copy(next[BlockSize+100:], []byte("changed"))
	changed := make([]bool, len(next)/smallBlock)
	changed[(BlockSize+100)/smallBlock] = true
	b2, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s2", SnapshotID: "id2", Source: &memSource{data: next},
		Changed: changed, ChangedSince: "s1", ChangedSinceID: "id1"})
	if err != nil {
		t.Fatal(err)
	}
	if st.BytesRead != BlockSize || st.BlocksUploaded != 1 || st.BlocksReused != 4 {
		t.Fatalf("incremental backup: %+v", st)
	}
	mustRestore(t, s, "vol", b2.Name, next)

	// Dedupe: the same content again uploads nothing.
	b3, st, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s3", Source: &memSource{data: next}})
	if err != nil || st.BlocksUploaded != 0 || st.BlocksReused != 5 {
		t.Fatalf("a backup of unchanged content: %+v, %v", st, err)
	}

	l, err := s.Scan()
	if err != nil || len(l.Volumes) != 1 || len(l.Backups["vol"]) != 3 || len(l.Invalid) != 0 {
		t.Fatalf("scan: %+v, %v", l, err)
	}
	if l.Volumes[0].LastBackupName != b3.Name || l.Backups["vol"][2].Name != b3.Name {
		t.Fatalf("the last backup is not %s: %+v", b3.Name, l.Volumes[0])
	}

	// Deleting frees only what no remaining backup uses.
	for _, b := range []*BackupInfo{b1, b3} {
		if err := s.Delete("vol", b.Name); err != nil {
			t.Fatal(err)
		}
	}
	mustRestore(t, s, "vol", b2.Name, next)
	if n := countBlockKeys(t, s); n != 5 {
		t.Fatalf("%d blocks stored, want the 5 of %s", n, b2.Name)
	}
	if err := s.Delete("vol", b2.Name); err != nil {
		t.Fatal(err)
	}
	if n := countBlockKeys(t, s); n != 0 {
		t.Fatalf("%d blocks left after the last deletion", n)
	}
	if v, err := s.Volume("vol"); err != nil || v.LastBackupName != "" {
		t.Fatalf("volume after every deletion: %+v, %v", v, err)
	}
}

// countBlockKeys counts the block objects of volume vol through the driver.
func countBlockKeys(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	l1, err := s.driver.List(volumeKey("vol") + "/blocks")
	if err != nil {
		t.Fatal(err)
	}
	for _, d1 := range l1 {
		l2, err := s.driver.List(d1)
		if err != nil {
			t.Fatal(err)
		}
		for _, d2 := range l2 {
			files, err := s.driver.List(d2)
			if err != nil {
				t.Fatal(err)
			}
			n += len(files)
		}
	}
	return n
}

func conformConcurrentVolumes(t *testing.T, open func() *Store) {
	const volumes = 4
	var wg sync.WaitGroup
	errs := make([]error, volumes)
	names := make([]string, volumes)
	for i := 0; i < volumes; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each volume through its own Store, as separate engines do.
			info, _, err := open().Backup(BackupRequest{Volume: fmt.Sprintf("cv-%d", i), Snapshot: "s", Source: &memSource{data: halfRandom(int64(i), 3*BlockSize)}})
			errs[i] = err
			if err == nil {
				names[i] = info.Name
			}
		}()
	}
	wg.Wait()
	s := open()
	for i := 0; i < volumes; i++ {
		if errs[i] != nil {
			t.Fatalf("volume %d: %v", i, errs[i])
		}
		mustRestore(t, s, fmt.Sprintf("cv-%d", i), names[i], halfRandom(int64(i), 3*BlockSize))
	}
	l, err := s.Scan()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < volumes; i++ {
		if len(l.Backups[fmt.Sprintf("cv-%d", i)]) != 1 {
			t.Fatalf("volume %d lists %d backups", i, len(l.Backups[fmt.Sprintf("cv-%d", i)]))
		}
	}
}

// conformBackupBesideDelete: a backup reusing the blocks of a backup that
// another Store deletes meanwhile restores what it backed up.
func conformBackupBesideDelete(t *testing.T, engine, controller *Store) {
	first := halfRandom(7, 2*BlockSize)
	b1, _, err := engine.Backup(BackupRequest{Volume: "both", Snapshot: "s1", Source: &memSource{data: first}})
	if err != nil {
		t.Fatal(err)
	}
	second := bytes.Clone(first)
	copy(second[BlockSize:], halfRandom(8, BlockSize))
	src := &memSource{data: second, gateAt: BlockSize, gate: make(chan struct{})}
	var progressed atomic.Bool
	done := make(chan error, 1)
	var b2 *BackupInfo
	go func() {
		var err error
		b2, _, err = engine.Backup(BackupRequest{Volume: "both", Snapshot: "s2", Source: src, Progress: func(p int) { progressed.Store(p > 0) }})
		done <- err
	}()
	eventuallyTrue(t, "the backup past its first block", progressed.Load)
	delErr := controller.Delete("both", b1.Name)
	close(src.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if delErr != nil && !errors.Is(delErr, ErrLocked) {
		t.Fatalf("deletion beside a backup: %v", delErr)
	}
	if delErr != nil {
		if err := controller.Delete("both", b1.Name); err != nil {
			t.Fatalf("the deletion after the backup: %v", err)
		}
	}
	mustRestore(t, controller, "both", b2.Name, second)
	if !strings.HasPrefix(b2.Name, "backup-") {
		t.Fatalf("backup name %q", b2.Name)
	}
}

func eventuallyTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(testtime.Scale(20 * time.Second)); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
