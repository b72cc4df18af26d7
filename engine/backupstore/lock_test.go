package backupstore

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memSource is snapshot content in memory whose reads at or past gateAt
// wait until the gate opens.
type memSource struct {
	data   []byte
	gateAt int64
	gate   chan struct{}
}

func (m *memSource) Size() int64 { return int64(len(m.data)) }

func (m *memSource) ReadAt(p []byte, off int64) (int, error) {
	if m.gate != nil && off >= m.gateAt {
		<-m.gate
	}
	return copy(p, m.data[off:]), nil
}

func blocksOf(fill ...byte) []byte {
	var b []byte
	for _, f := range fill {
		b = append(b, bytes.Repeat([]byte{f}, BlockSize)...)
	}
	return b
}

// restoreBytes restores a backup into memory.
func restoreBytes(s *Store, volume, backup string, size int) ([]byte, error) {
	dst := &memDst{data: make([]byte, size)}
	_, err := s.Restore(volume, backup, dst, nil)
	return dst.data, err
}

type memDst struct{ data []byte }

func (m *memDst) WriteAt(p []byte, off int64) (int, error) { return copy(m.data[off:], p), nil }

// TestADeletionNeverFreesABlockARunningBackupReuses: two Stores on one
// target, as the engine and the backup target controller (or two
// managers) have. A backup that reused a block of b1 is held mid-way
// while b1 is deleted: the deletion must not free that block.
func TestADeletionNeverFreesABlockARunningBackupReuses(t *testing.T) {
	root := t.TempDir()
	engineStore, err := Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	controllerStore, err := Open("file://" + root)
	if err != nil {
		t.Fatal(err)
	}
	b1, _, err := engineStore.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a', 'b')}})
	if err != nil {
		t.Fatal(err)
	}

	// b2 shares b1's first block; its second block's read waits.
	src := &memSource{data: blocksOf('a', 'c'), gateAt: BlockSize, gate: make(chan struct{})}
	var progressed atomic.Bool
	type result struct {
		info *BackupInfo
		err  error
	}
	done := make(chan result, 1)
	go func() {
		info, _, err := engineStore.Backup(BackupRequest{Name: "b2", Volume: "vol", Snapshot: "s2", Source: src,
			Progress: func(p int) {
				if p > 0 {
					progressed.Store(true)
				}
			}})
		done <- result{info, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); !progressed.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("b2 did not get past its first block")
		}
	}
	delErr := controllerStore.Delete("vol", b1.Name)
	close(src.gate)
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if delErr == nil {
		t.Log("the deletion ran beside the backup")
	} else if !errors.Is(delErr, ErrLocked) {
		t.Fatalf("deletion beside a backup: %v, want ErrLocked", delErr)
	}
	got, err := restoreBytes(controllerStore, "vol", "b2", 2*BlockSize)
	if err != nil {
		t.Fatalf("restore of b2 after b1 was deleted beside it: %v", err)
	}
	if !bytes.Equal(got, src.data) {
		t.Fatal("b2 restores other bytes than were backed up")
	}
	// Once the backup is done, the deletion goes through.
	if delErr != nil {
		if err := controllerStore.Delete("vol", b1.Name); err != nil {
			t.Fatalf("deletion after the backup: %v", err)
		}
		if got, err := restoreBytes(controllerStore, "vol", "b2", 2*BlockSize); err != nil || !bytes.Equal(got, src.data) {
			t.Fatalf("restore of b2 after b1's deletion: %v", err)
		}
	}
}

// gatedDeletes holds every deletion of a block until the gate opens.
type gatedDeletes struct {
	Driver
	reached chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (d *gatedDeletes) Delete(key string) error {
	if strings.HasSuffix(key, ".blk") {
		d.once.Do(func() { close(d.reached) })
		<-d.gate
	}
	return d.Driver.Delete(key)
}

// TestABackupWaitsForADeletionInProgress: a backup that starts while a
// deletion collects blocks waits for it, then stores what it needs.
func TestABackupWaitsForADeletionInProgress(t *testing.T) {
	root := t.TempDir()
	plain := NewStore("file://"+root, &FileDriver{Root: root})
	plain.lockPoll = 5 * time.Millisecond
	if _, _, err := plain.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a', 'b')}}); err != nil {
		t.Fatal(err)
	}
	gated := &gatedDeletes{Driver: &FileDriver{Root: root}, reached: make(chan struct{}), gate: make(chan struct{})}
	deleting := NewStore("file://"+root, gated)
	delDone := make(chan error, 1)
	go func() { delDone <- deleting.Delete("vol", "b1") }()
	<-gated.reached

	data := blocksOf('a', 'c')
	backupDone := make(chan error, 1)
	go func() {
		_, _, err := plain.Backup(BackupRequest{Name: "b2", Volume: "vol", Snapshot: "s2", Source: &memSource{data: data}})
		backupDone <- err
	}()
	select {
	case err := <-backupDone:
		t.Fatalf("the backup ran while a deletion collected blocks (err %v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(gated.gate)
	if err := <-delDone; err != nil {
		t.Fatal(err)
	}
	if err := <-backupDone; err != nil {
		t.Fatal(err)
	}
	if got, err := restoreBytes(plain, "vol", "b2", len(data)); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("restore of the backup that waited: %v", err)
	}
}

// TestAStaleLockIsRemovedAfterItsExpiry: a lock left by a holder that
// died blocks a deletion only until it has been seen unchanged for the
// expiry, on the observer's own clock.
func TestAStaleLockIsRemovedAfterItsExpiry(t *testing.T) {
	s, root := newStore(t)
	s.lockRefresh, s.lockExpiry = 20*time.Millisecond, 300*time.Millisecond
	// The store's clock, moved by the test: how long a lock has gone
	// unchanged is judged by it, so a loaded machine's pauses do not
	// age a lock the test means fresh.
	var mu sync.Mutex
	clock := time.Now()
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	if _, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a')}}); err != nil {
		t.Fatal(err)
	}
	dead := locksKey("vol") + "/backup-dead.lck"
	if err := s.driver.Write(dead, []byte(`{"kind":"backup","id":"dead","host":"gone","seq":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("vol", "b1"); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), `host "gone"`) {
		t.Fatalf("deletion beside a fresh lock: %v", err)
	}
	advance(s.lockExpiry)
	if err := s.Delete("vol", "b1"); err != nil {
		t.Fatalf("deletion after the lock went stale: %v", err)
	}
	if ok, _ := s.driver.Exists(dead); ok {
		t.Fatal("the stale lock is still there")
	}
	if n := countBlocks(t, root); n != 0 {
		t.Fatalf("%d blocks left", n)
	}
	// A lock whose holder refreshes it is never stale.
	live := locksKey("vol") + "/backup-live.lck"
	for i := 0; i < 8; i++ {
		if err := s.driver.Write(live, []byte(`{"kind":"backup","id":"live","seq":`+string(rune('0'+i))+`}`)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.liveLocks("vol", ""); err != nil {
			t.Fatal(err)
		}
		advance(s.lockExpiry / 4)
	}
	if others, err := s.liveLocks("vol", ""); err != nil || len(others) != 1 {
		t.Fatalf("a refreshed lock: %+v, %v", others, err)
	}
}

// failingLockWrites fails every write of a lock after the first.
type failingLockWrites struct {
	Driver
	mu     sync.Mutex
	writes int
}

func (d *failingLockWrites) Write(key string, data []byte) error {
	if strings.HasSuffix(key, ".lck") {
		d.mu.Lock()
		d.writes++
		n := d.writes
		d.mu.Unlock()
		if n > 1 {
			return errTargetDown
		}
	}
	return d.Driver.Write(key, data)
}

// TestABackupWhoseLockWasLostIsNotMadeVisible: a backup that could not
// refresh its lock for half the expiry may have been taken for dead and
// raced by a deletion; it fails rather than show a backup that may lack
// blocks.
func TestABackupWhoseLockWasLostIsNotMadeVisible(t *testing.T) {
	root := t.TempDir()
	s := NewStore("file://"+root, &failingLockWrites{Driver: &FileDriver{Root: root}})
	s.lockRefresh, s.lockExpiry = 10*time.Millisecond, 100*time.Millisecond
	src := &memSource{data: blocksOf('a', 'b'), gateAt: BlockSize, gate: make(chan struct{})}
	time.AfterFunc(200*time.Millisecond, func() { close(src.gate) })
	_, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: src})
	if err == nil || !strings.Contains(err.Error(), "lock in the backup target was lost") {
		t.Fatalf("backup with a lost lock: %v", err)
	}
	if list, err := s.List("vol"); err != nil || len(list) != 0 {
		t.Fatalf("backups listed after a lost lock: %+v, %v", list, err)
	}
}

// TestLocksConflict: backups and restores share a volume; a deletion or
// an unreadable lock excludes everything.
func TestLocksConflict(t *testing.T) {
	for _, c := range []struct {
		mine, theirs string
		want         bool
	}{
		{lockBackup, lockBackup, false}, {lockBackup, lockRestore, false}, {lockRestore, lockBackup, false},
		{lockBackup, lockDelete, true}, {lockDelete, lockBackup, true}, {lockDelete, lockRestore, true},
		{lockDelete, lockDelete, true}, {lockBackup, "unreadable lock", true},
	} {
		if got := conflicts(c.mine, c.theirs); got != c.want {
			t.Errorf("conflicts(%s, %s) = %v", c.mine, c.theirs, got)
		}
	}
}

// panickingBlocks panics on every write of a block.
type panickingBlocks struct{ Driver }

func (d panickingBlocks) Write(key string, data []byte) error {
	if strings.HasSuffix(key, ".blk") {
		panic("driver bug")
	}
	return d.Driver.Write(key, data)
}

// TestAPanicInABackupWorkerIsTheBackupsError: the block workers run
// outside any caller that could recover; a panic there fails the backup
// and nothing else.
func TestAPanicInABackupWorkerIsTheBackupsError(t *testing.T) {
	root := t.TempDir()
	s := NewStore("file://"+root, panickingBlocks{&FileDriver{Root: root}})
	_, _, err := s.Backup(BackupRequest{Volume: "vol", Snapshot: "s1", Source: &memSource{data: blocksOf('a', 'b')}})
	if err == nil || !strings.Contains(err.Error(), "internal error: driver bug") {
		t.Fatalf("backup through a panicking driver: %v", err)
	}
	if list, err := s.List("vol"); err != nil || len(list) != 0 {
		t.Fatalf("listed after the panic: %+v, %v", list, err)
	}
}

// stallingLockWrites holds the second write of a lock until release is
// closed, as a hard NFS mount or a paused process does.
type stallingLockWrites struct {
	Driver
	release chan struct{}
	mu      sync.Mutex
	writes  int
}

func (d *stallingLockWrites) Write(key string, data []byte) error {
	if strings.HasSuffix(key, ".lck") {
		d.mu.Lock()
		d.writes++
		n := d.writes
		d.mu.Unlock()
		if n == 2 {
			<-d.release
		}
	}
	return d.Driver.Write(key, data)
}

// TestALockRefreshThatCompletesLateDoesNotReviveTheLock: a refresh that
// stalls past the expiry and then succeeds must not make the lock look
// held again: another manager may have removed it meanwhile and freed
// blocks the backup reuses. The backup fails instead of showing itself.
func TestALockRefreshThatCompletesLateDoesNotReviveTheLock(t *testing.T) {
	root := t.TempDir()
	d := &stallingLockWrites{Driver: &FileDriver{Root: root}, release: make(chan struct{})}
	s := NewStore("file://"+root, d)
	s.lockRefresh, s.lockExpiry = 10*time.Millisecond, 100*time.Millisecond
	src := &memSource{data: blocksOf('a', 'b'), gateAt: BlockSize, gate: make(chan struct{})}
	// The refresh stalls past the expiry, then completes; the backup
	// goes on only after that.
	time.AfterFunc(150*time.Millisecond, func() { close(d.release) })
	time.AfterFunc(300*time.Millisecond, func() { close(src.gate) })
	_, _, err := s.Backup(BackupRequest{Name: "b1", Volume: "vol", Snapshot: "s1", Source: src})
	if err == nil || !strings.Contains(err.Error(), "lock in the backup target was lost") {
		t.Fatalf("backup whose lock refresh completed late: %v", err)
	}
	if list, err := s.List("vol"); err != nil || len(list) != 0 {
		t.Fatalf("backups listed after a late refresh: %+v, %v", list, err)
	}
}

// TestALockWriteThatCompletesInTimeKeepsTheLock: the lock's validity
// counts from the start of its last write, and a slow write that
// completes within the margin keeps it.
func TestALockWriteThatCompletesInTimeKeepsTheLock(t *testing.T) {
	root := t.TempDir()
	s := NewStore("file://"+root, &FileDriver{Root: root})
	s.lockRefresh, s.lockExpiry = time.Hour, 100*time.Second
	now := time.Unix(1000, 0)
	s.now = func() time.Time { return now }
	l := &heldLock{s: s, key: locksKey("vol") + "/backup-x.lck", record: lockRecord{Kind: lockBackup, ID: "x"}}
	if err := l.write(); err != nil || !l.valid() {
		t.Fatalf("first write: %v, valid %v", err, l.valid())
	}
	// A write that starts at 10 s and ends at 40 s: good from 10 s.
	d := &clockAdvancingWrites{Driver: s.driver, advance: func() { now = now.Add(30 * time.Second) }}
	s.driver = d
	now = now.Add(10 * time.Second)
	if err := l.write(); err != nil || !l.valid() {
		t.Fatalf("slow write within the margin: %v, valid %v", err, l.valid())
	}
	if got := l.lastOK; !got.Equal(time.Unix(1010, 0)) {
		t.Fatalf("lastOK %v, want the write's start", got)
	}
	// One that starts at 45 s and ends at 75 s: 65 s after the last
	// good write's start, past half the expiry.
	now = now.Add(5 * time.Second)
	if err := l.write(); !errors.Is(err, errLockLost) || l.valid() {
		t.Fatalf("write completing past the margin: %v, valid %v", err, l.valid())
	}
}

// clockAdvancingWrites moves a test clock forward during each write.
type clockAdvancingWrites struct {
	Driver
	advance func()
}

func (d *clockAdvancingWrites) Write(key string, data []byte) error {
	d.advance()
	return d.Driver.Write(key, data)
}
