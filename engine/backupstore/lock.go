package backupstore

// Locks in the backup target.
//
// A backup, a restore and a deletion of a volume each hold a lock object in
// the target while they run, so that a deletion's block collection never
// frees a block that a backup in progress reuses, whichever process or
// node runs either of them:
//
//	backupstore/volumes/<volume>/locks/<kind>-<id>.lck
//	    {"kind": "backup", "id": ..., "host": ..., "seq": 7, ...}
//
// Backups and restores share the volume; a deletion excludes every other
// operation. The protocol needs only what every object store offers:
// writing, reading, listing and deleting whole objects, with a list that
// shows an object written before it (S3 has been strongly consistent so
// since December 2020; NFS and local disks always were). No rename, no
// append, no compare-and-swap.
//
//  1. Write our own lock, then list the volume's locks.
//  2. A deletion that sees any other live lock deletes its own and gives
//     up with ErrLocked (the backup target controller retries it later).
//  3. A backup or restore that sees a live deletion lock keeps its own and
//     waits until that lock is gone.
//
// Why this is safe: of two conflicting operations, the one that wrote its
// lock second lists after the other's write, so it sees the other's lock.
// If that one is the deletion, it gives up; if it is the backup, it waits
// for the deletion to end. So a deletion never collects blocks while a
// backup that could reuse them runs. (The first writer may see the second
// too: a deletion then gives up, which is safe, and a backup then waits
// for a deletion that is giving up.) A backup that waits holds its lock,
// and a deletion never waits holding one, so nothing deadlocks.
//
// A holder that dies leaves its lock behind. Each holder rewrites its lock
// every lockRefresh with the next seq, and another process judges a lock
// stale when it has seen the same content for lockExpiry on its own clock:
// no clocks of different nodes are ever compared. A holder counts its lock
// good for lockExpiry/2 from the start of its last write; once that has
// passed, even if a stalled write then completes, it knows its lock may be
// judged stale and stops for good (lost): a deletion checks this before
// each object it deletes, a backup before it makes itself visible and
// again after, taking itself back if its lock was lost meanwhile.

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
)

// Lock kinds.
const (
	lockBackup  = "backup"
	lockRestore = "restore"
	lockDelete  = "delete"
)

// Lock timing, as Longhorn's backupstore has it: a holder refreshes its
// lock well within the time after which others judge it stale.
const (
	defaultLockRefresh = 20 * time.Second
	defaultLockExpiry  = 150 * time.Second
	defaultLockPoll    = time.Second
)

// ErrLocked is returned by a deletion that found another operation on the
// volume in progress; it is safe to retry later.
var ErrLocked = errors.New("another operation on the volume is in progress in the backup target")

// lockRecord is a lock object's content.
type lockRecord struct {
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	Host       string `json:"host"`
	Seq        int64  `json:"seq"`
	AcquiredAt string `json:"acquiredAt"`
}

func locksKey(volume string) string { return volumeKey(volume) + "/locks" }

// conflicts tells whether an operation of kind mine may not run beside one
// of kind theirs. An unknown kind (a corrupt lock) conflicts with all.
func conflicts(mine, theirs string) bool {
	shared := func(k string) bool { return k == lockBackup || k == lockRestore }
	return !(shared(mine) && shared(theirs))
}

// observations remember what this process saw of other holders' locks, by
// target and key: the content and since when (on this process's clock) it has been
// the same. They are shared by every Store of the process, so a deletion
// retried through a new Store object still knows how long a lock was seen
// unchanged.
var observations = struct {
	sync.Mutex
	seen map[string]observation
}{seen: map[string]observation{}}

type observation struct {
	sum   [32]byte
	since time.Time
}

// observe records a lock's content and reports whether it has stayed the
// same for expiry.
func observe(key string, content []byte, now time.Time, expiry time.Duration) (stale bool) {
	sum := sha256.Sum256(content)
	observations.Lock()
	defer observations.Unlock()
	o, ok := observations.seen[key]
	if !ok || o.sum != sum || now.Before(o.since) {
		observations.seen[key] = observation{sum: sum, since: now}
		return false
	}
	return now.Sub(o.since) >= expiry
}

// forgetMissing drops the observations of a volume's locks that are gone.
func forgetMissing(prefix string, present map[string]bool) {
	observations.Lock()
	defer observations.Unlock()
	for key := range observations.seen {
		if strings.HasPrefix(key, prefix+"/") && !present[key] {
			delete(observations.seen, key)
		}
	}
}

// heldLock is a lock this process holds.
type heldLock struct {
	s      *Store
	key    string
	record lockRecord
	log    *logrus.Entry

	mu     sync.Mutex
	lastOK time.Time
	lost   bool
	stop   chan struct{}
	done   chan struct{}
}

// otherLock is a live lock of another operation, as a listing found it.
type otherLock struct {
	key  string
	kind string
	host string
}

// lock takes a lock of kind on volume, waiting while a deletion holds the
// volume when kind is backup or restore. The caller must release it.
func (s *Store) lock(volume, kind string) (*heldLock, error) {
	host, _ := os.Hostname()
	id := uuid.NewString()
	l := &heldLock{
		s:      s,
		key:    locksKey(volume) + "/" + kind + "-" + id + ".lck",
		record: lockRecord{Kind: kind, ID: id, Host: host, AcquiredAt: s.now().UTC().Format(time.RFC3339Nano)},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	l.log = logrus.WithFields(logrus.Fields{"volume": volume, "lock": kind, "lockID": id})
	if err := l.write(); err != nil {
		return nil, fmt.Errorf("take the %s lock of volume %s in the backup target: %w", kind, volume, err)
	}
	go l.refresh()
	for waited := false; ; waited = true {
		others, err := s.liveLocks(volume, l.key)
		if err != nil {
			l.release()
			return nil, fmt.Errorf("read the locks of volume %s in the backup target: %w", volume, err)
		}
		var blocking *otherLock
		for i := range others {
			if conflicts(kind, others[i].kind) {
				blocking = &others[i]
				break
			}
		}
		if blocking == nil {
			if waited {
				l.log.Info("Backup target lock taken after waiting for a deletion")
			}
			return l, nil
		}
		if kind == lockDelete {
			l.release()
			return nil, fmt.Errorf("%w: a %s (lock %s, host %q); the deletion will be retried", ErrLocked, blocking.kind, path.Base(blocking.key), blocking.host)
		}
		if !waited {
			l.log.WithFields(logrus.Fields{"blockedBy": path.Base(blocking.key), "host": blocking.host}).Info("Waiting for a deletion in the backup target to end")
		}
		if !l.valid() {
			l.release()
			return nil, fmt.Errorf("the %s lock of volume %s could not be kept in the backup target while waiting for a deletion", kind, volume)
		}
		time.Sleep(s.lockPoll)
	}
}

// liveLocks lists the volume's locks other than ours that are not stale.
// A stale lock is deleted: its holder stopped long ago.
func (s *Store) liveLocks(volume, mine string) ([]otherLock, error) {
	prefix := locksKey(volume)
	keys, err := s.driver.List(prefix)
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	var out []otherLock
	for _, key := range keys {
		if key == mine || !strings.HasSuffix(key, ".lck") {
			continue
		}
		present[s.target+" "+key] = true
		content, err := s.driver.Read(key, maxRecordSize)
		switch {
		case errors.Is(err, ErrNotExist):
			continue // released since the listing
		case errors.Is(err, ErrInvalid):
			// Not a lock this store writes (a named pipe, a huge
			// object): an unreadable lock, stale once it has stayed so
			// for the expiry.
			content = []byte(err.Error())
		case err != nil:
			return nil, err
		}
		if observe(s.target+" "+key, content, s.now(), s.lockExpiry) {
			logrus.WithFields(logrus.Fields{"volume": volume, "lock": path.Base(key)}).Warnf("Removing a backup target lock unchanged for %v: its holder stopped", s.lockExpiry)
			if err := s.driver.Delete(key); err != nil {
				return nil, err
			}
			continue
		}
		var rec lockRecord
		if err := json.Unmarshal(content, &rec); err != nil || rec.Kind == "" {
			rec.Kind = "unreadable lock"
		}
		out = append(out, otherLock{key: key, kind: rec.Kind, host: rec.Host})
	}
	forgetMissing(s.target+" "+prefix, present)
	return out, nil
}

// write writes the lock's record. A write can take any time (a hard NFS
// mount, a paused process), and others count a lock's age from when they
// first see its new content, no earlier than the write's start: so the
// lock is good for lockExpiry/2 from the start of its last write, and a
// write that completes after that does not revive it. By then another
// manager may have judged it stale, removed it and freed blocks; the
// late write only recreated the object.
func (l *heldLock) write() error {
	l.mu.Lock()
	data, err := json.Marshal(l.record)
	l.mu.Unlock()
	if err != nil {
		return err
	}
	start := l.s.now()
	if err := l.s.driver.Write(l.key, data); err != nil {
		return err
	}
	end := l.s.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lastOK.IsZero() && end.Sub(l.lastOK) >= l.s.lockExpiry/2 {
		l.lost = true
	}
	if l.lost {
		return errLockLost
	}
	l.lastOK = start
	return nil
}

// errLockLost is a lock write that completed after the lock was lost.
var errLockLost = errors.New("the lock was lost before this write completed")

// refresh rewrites the lock until it is released, or until it could not
// be rewritten for half the expiry: then it is lost for good, as another
// process may judge it stale.
func (l *heldLock) refresh() {
	defer close(l.done)
	defer func() {
		// A refresher that panicked keeps nothing alive: the lock is
		// lost, and its holder stops at its next check.
		if r := recover(); r != nil {
			l.log.WithField("panic", fmt.Sprint(r)).Error("The backup target lock's refresher panicked")
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
		}
	}()
	t := time.NewTicker(l.s.lockRefresh)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if !l.valid() {
			l.log.Error("Lost the backup target lock: it could not be refreshed in time")
			return
		}
		l.mu.Lock()
		l.record.Seq++
		l.mu.Unlock()
		if err := l.write(); errors.Is(err, errLockLost) {
			l.log.Error("Lost the backup target lock: its refresh completed too late to keep it")
			return
		} else if err != nil {
			l.log.WithError(err).Warn("Could not refresh the backup target lock")
		}
	}
}

// valid tells whether the lock is surely still seen as live by others.
func (l *heldLock) valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.lost && l.s.now().Sub(l.lastOK) >= l.s.lockExpiry/2 {
		l.lost = true
	}
	return !l.lost
}

// check returns an error once the lock is lost.
func (l *heldLock) check() error {
	if l.valid() {
		return nil
	}
	return fmt.Errorf("the %s lock in the backup target was lost (it could not be refreshed for %v); stopped so as not to race another manager", l.record.Kind, l.s.lockExpiry/2)
}

// release stops refreshing and deletes the lock.
func (l *heldLock) release() {
	select {
	case <-l.stop:
		return
	default:
	}
	close(l.stop)
	<-l.done
	if err := l.s.driver.Delete(l.key); err != nil {
		l.log.WithError(err).Warn("Could not delete the backup target lock; others will take it for stale in time")
	}
}
