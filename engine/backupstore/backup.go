package backupstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
	"github.com/sirupsen/logrus"
)

// Backup stores a snapshot and returns the backup once it is visible.
func (s *Store) Backup(req BackupRequest) (*BackupInfo, Stats, error) {
	var stats Stats
	method, err := s.checkRequest(req)
	if err != nil {
		return nil, stats, err
	}
	// The lock is taken before anything is read: from here until the
	// backup is visible, no deletion collects a block it may reuse.
	lock, err := s.lock(req.Volume, lockBackup)
	if err != nil {
		return nil, stats, err
	}
	defer lock.release()

	vol, previous, changed, err := s.backupBase(req, method)
	if err != nil {
		return nil, stats, err
	}
	req.Changed = changed
	info, err := s.newBackupInfo(req, method)
	if err != nil {
		return nil, stats, err
	}
	refs, err := s.storeBlocks(req, method, previous, &stats)
	if err != nil {
		return nil, stats, err
	}
	// Full only when the backup uploaded every block it holds: asked
	// full, or a first backup (no last backup on record) that found none
	// of its blocks in the target. Without the volume's record a backup
	// not asked full still reuses the blocks the target holds, a rotted
	// one too, and a failed drill's next full backup must not be taken
	// as done by it.
	info.Mode = ModeIncremental
	if req.Full || (vol.LastBackupName == "" && stats.BlocksInTarget == 0) {
		info.Mode = ModeFull
	}
	info.NewlyUploaded, info.ReUploaded = stats.BytesUploaded-stats.BytesReUploaded, stats.BytesReUploaded
	size := req.Source.Size()
	for i, ref := range refs {
		if ref != nil {
			info.Blocks = append(info.Blocks, *ref)
			info.Size += min(int64(BlockSize), size-int64(i)*BlockSize)
		}
	}
	info.SnapshotDigest = snapshotDigest(info.VolumeSize, info.Blocks)
	if err := s.publish(lock, info, vol); err != nil {
		return nil, stats, err
	}
	if req.Progress != nil {
		req.Progress(100)
	}
	return info, stats, nil
}

// checkRequest validates a backup request and returns the compression
// method it uses.
func (s *Store) checkRequest(req BackupRequest) (method string, err error) {
	if req.Volume == "" || req.Snapshot == "" || req.Source == nil {
		return "", errors.New("a backup needs a volume, a snapshot and its content")
	}
	if err := checkName("volume", req.Volume); err != nil {
		return "", err
	}
	if req.Name != "" {
		if err := checkName("backup", req.Name); err != nil {
			return "", err
		}
	}
	if size := req.Source.Size(); size <= 0 || size > MaxVolumeSize {
		return "", fmt.Errorf("snapshot %s: a size of %d bytes cannot be backed up (1 byte to 1 PiB)", req.Snapshot, size)
	}
	method = req.Compression
	if method == "" {
		method = s.compression
	}
	if err := CheckCompression(method); err != nil {
		return "", fmt.Errorf("backup compression: %w", err)
	}
	return method, nil
}

// backupBase reads the volume's record and returns it (a new one for a
// volume without), with the blocks of its last backup that the backup may
// reuse where nothing changed, by offset, and the change map that says
// where: only when that backup was taken from the very snapshot the
// changes are counted from (by ID: a name may be reused after a purge),
// and stored the same way (a block's file name says its method). previous
// and changed are nil for a full backup.
func (s *Store) backupBase(req BackupRequest, method string) (vol VolumeInfo, previous map[int64]string, changed []bool, err error) {
	size := req.Source.Size()
	vol = VolumeInfo{Name: req.Volume, Size: size, CreatedAt: s.now().UTC().Format(time.RFC3339)}
	switch found, err := s.Volume(req.Volume); {
	case err == nil:
		vol = *found
	case errors.Is(err, ErrInvalid):
		// The volume record is an index of the backups; a new one
		// replaces it, and this backup is full.
		logrus.WithField("volume", req.Volume).WithError(err).Warn("Replacing an invalid volume record in the backup target")
	case !errors.Is(err, ErrNotExist):
		return vol, nil, nil, fmt.Errorf("read volume %s in the backup target: %w", req.Volume, err)
	}
	vol.Size = size
	incremental := !req.Full && ((req.Changed != nil && req.ChangedSinceID != "") || req.ChangedSinceLast != nil)
	if !incremental || vol.LastBackupName == "" {
		return vol, nil, nil, nil
	}
	last, err := s.Get(req.Volume, vol.LastBackupName)
	if err != nil || last.VolumeSize != size || last.Compression != method {
		return vol, nil, nil, nil
	}
	switch {
	case req.Changed != nil:
		if last.SnapshotName == req.ChangedSince && last.SnapshotID == req.ChangedSinceID {
			changed = req.Changed
		}
	case last.SnapshotID != "":
		changed = req.ChangedSinceLast(last)
	}
	if changed == nil {
		return vol, nil, nil, nil
	}
	previous = make(map[int64]string, len(last.Blocks))
	for _, ref := range last.Blocks {
		previous[ref.Offset] = ref.Checksum
	}
	return vol, previous, changed, nil
}

// newBackupInfo names the backup (unless the request does) and checks the
// name is free.
func (s *Store) newBackupInfo(req BackupRequest, method string) (*BackupInfo, error) {
	name := req.Name
	if name == "" {
		name = newBackupName()
	}
	if ok, err := s.driver.Exists(backupCfgKey(req.Volume, name)); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("backup %s of volume %s already exists", name, req.Volume)
	}
	return &BackupInfo{
		Name: name, VolumeName: req.Volume, VolumeSize: req.Source.Size(), SnapshotName: req.Snapshot, SnapshotID: req.SnapshotID,
		SnapshotCreatedAt: req.SnapshotCreatedAt, Labels: req.Labels, Compression: method,
		BackingImageName: req.BackingImageName, BackingImageChecksum: req.BackingImageChecksum,
	}, nil
}

// publish makes the backup visible by writing its config, last, then
// records it as the volume's last backup. Every block it names is
// durable by then (storeBlocks committed them). The config may appear
// only while the lock surely held: a lock lost before or during the write
// may have let a deletion free a reused block.
func (s *Store) publish(lock *heldLock, info *BackupInfo, vol VolumeInfo) error {
	// To the nanosecond, so backups taken within a second keep their order.
	info.CreatedAt = s.now().UTC().Format(time.RFC3339Nano)
	if err := lock.check(); err != nil {
		return err
	}
	if err := s.writeJSON(backupCfgKey(info.VolumeName, info.Name), info); err != nil {
		return fmt.Errorf("write backup %s: %w", info.Name, err)
	}
	if err := lock.check(); err != nil {
		if delErr := s.driver.Delete(backupCfgKey(info.VolumeName, info.Name)); delErr != nil {
			return fmt.Errorf("%w; and the backup written meanwhile could not be taken back: %v", err, delErr)
		}
		return err
	}
	vol.LastBackupName, vol.LastBackupAt = info.Name, info.CreatedAt
	if err := s.writeJSON(volumeCfgKey(info.VolumeName), vol); err != nil {
		return fmt.Errorf("write volume %s in the backup target: %w", info.VolumeName, err)
	}
	return nil
}

// storeBlocks reads the snapshot's blocks and stores those the target
// lacks; previous holds the checksums (by offset) a block unchanged since
// the last backup reuses without being read. Reading stays sequential;
// checksums and compression, where a backup spends its CPU, run on
// req.Concurrency workers; uploads on twice as many goroutines (the
// batch's), whose waits on the target overlap. It returns once every
// block stored is durable in the target.
func (s *Store) storeBlocks(req BackupRequest, method string, previous map[int64]string, stats *Stats) ([]*BlockRef, error) {
	workers := req.Concurrency
	if workers <= 0 {
		workers = s.concurrency
	}
	batch, err := newBlockBatch(s.driver, req.Volume, batchWriters(workers))
	if err != nil {
		return nil, fmt.Errorf("store blocks of volume %s: %w", req.Volume, err)
	}
	size := req.Source.Size()
	blocks := (size + BlockSize - 1) / BlockSize
	r := &blockRun{s: s, req: req, method: method, batch: batch, stats: stats, blocks: blocks, present: s.presentBlocks(req.Volume, previous),
		refs: make([]*BlockRef, blocks), jobs: make(chan blockJob), free: make(chan []byte, workers+1)}
	for i := 0; i < workers+1; i++ {
		r.free <- make([]byte, BlockSize)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work()
		}()
	}
	readErr := r.read(previous)
	close(r.jobs)
	wg.Wait()
	err = readErr
	if err == nil {
		err = r.firstErr
	}
	if err != nil {
		batch.abort()
		return nil, err
	}
	if err := batch.commit(); err != nil {
		return nil, err
	}
	return r.refs, nil
}

// blockRun is one backup's pass over its snapshot: a reader handing
// blocks to workers.
type blockRun struct {
	s      *Store
	req    BackupRequest
	method string
	batch  blockBatch
	blocks int64
	// present, when not nil, holds the keys of the blocks the volume had
	// when the backup started: no other block is looked up.
	present map[string]bool
	jobs    chan blockJob
	free    chan []byte // block buffers, reused

	mu       sync.Mutex // guards stats, refs, firstErr and done
	stats    *Stats
	refs     []*BlockRef
	firstErr error
	done     int64
}

type blockJob struct {
	index int64
	data  []byte
}

// work checksums, compresses and stores the blocks it is handed.
func (r *blockRun) work() {
	var z bytes.Buffer
	for j := range r.jobs {
		checksum, uploaded, again, found, err := r.s.storeBlock(r.batch, r.present, r.req.Volume, r.method, j.data, &z, r.req.Full)
		r.mu.Lock()
		switch {
		case err != nil && r.firstErr == nil:
			r.firstErr = err
		case err == nil && uploaded > 0:
			r.stats.BytesUploaded += uploaded
			r.stats.BlocksUploaded++
			if again {
				r.stats.BytesReUploaded += uploaded
			}
		case err == nil:
			r.stats.BlocksReused++
			if found {
				r.stats.BlocksInTarget++
			}
		}
		if err == nil {
			r.refs[j.index] = &BlockRef{Offset: j.index * BlockSize, Checksum: checksum}
		}
		r.done++
		if r.req.Progress != nil {
			r.req.Progress(int(r.done * 100 / r.blocks))
		}
		r.mu.Unlock()
		r.free <- j.data[:cap(j.data)]
	}
}

// read reads the blocks that need storing, in order, and hands them to
// the workers; it stops at the first error, its own or a worker's.
func (r *blockRun) read(previous map[int64]string) error {
	req, size := r.req, r.req.Source.Size()
	for i := int64(0); i < r.blocks; i++ {
		r.mu.Lock()
		failed := r.firstErr != nil
		r.mu.Unlock()
		if failed {
			return nil
		}
		off := i * BlockSize
		n := min(int64(BlockSize), size-off)
		if previous != nil && !changedIn(req.Changed, off, n) {
			if sum, ok := previous[off]; ok {
				r.mu.Lock()
				r.refs[i] = &BlockRef{Offset: off, Checksum: sum}
				r.stats.BlocksReused++
				r.mu.Unlock()
			}
			continue
		}
		if req.Allocated != nil && !changedIn(req.Allocated, off, n) {
			continue
		}
		data := (<-r.free)[:n]
		if _, err := req.Source.ReadAt(data, off); err != nil {
			r.free <- data
			return fmt.Errorf("read snapshot %s at %d: %w", req.Snapshot, off, err)
		}
		r.mu.Lock()
		r.stats.BytesRead += n
		r.mu.Unlock()
		if req.Allocated == nil && isZero(data) {
			r.free <- data
			continue
		}
		r.jobs <- blockJob{index: i, data: data}
	}
	return nil
}

// presentBlocks lists the volume's blocks for a full backup (previous is
// nil) to a target that lists every key under a prefix in one go (S3,
// 1,000 keys a request): a full backup checks every block it reads, and
// one listing replaces a request per block. The blocks are in the
// volume's lock, so no deletion removes one meanwhile; one stored after
// the listing (by another backup of the volume) is stored again, which
// costs an upload and changes nothing. nil, for one request per block,
// for an incremental backup, which checks few, or when the listing fails.
func (s *Store) presentBlocks(volume string, previous map[int64]string) map[string]bool {
	d, ok := s.driver.(deepLister)
	if !ok || previous != nil {
		return nil
	}
	keys, err := d.ListAll(volumeKey(volume) + "/blocks")
	if err != nil {
		logrus.WithField("volume", volume).WithError(err).Warn("Cannot list the volume's blocks in the backup target; checking them one by one")
		return nil
	}
	present := make(map[string]bool, len(keys))
	for _, k := range keys {
		present[k] = true
	}
	return present
}

func changedIn(changed []bool, off, n int64) bool {
	for b := off / smallBlock; b < (off+n+smallBlock-1)/smallBlock && b < int64(len(changed)); b++ {
		if changed[b] {
			return true
		}
	}
	return false
}

// storeBlock checksums a block and stores it unless the store has it (or,
// for a full backup, whether it has it or not). A panic in it (a
// driver's, say) is the backup's error: the workers run outside any
// caller that could recover it.
func (s *Store) storeBlock(batch blockBatch, present map[string]bool, volume, method string, data []byte, z *bytes.Buffer, full bool) (checksum string, uploaded int64, again, found bool, err error) {
	defer panics.Recover(logrus.WithField("volume", volume), &err)
	sum := sha256.Sum256(data)
	checksum = hex.EncodeToString(sum[:])
	uploaded, again, found, err = s.putBlock(batch, present, volume, checksum, method, data, z, full)
	return checksum, uploaded, again, found, err
}

// putBlock stores a block unless the store has it, or another worker of
// the backup stores it; it returns the bytes uploaded (0 when the block
// was there, found: the target held it). A full backup uploads the block
// even when the store has it (again: it was there). With present (see
// presentBlocks), a block not in it is taken for missing without asking
// the target.
func (s *Store) putBlock(batch blockBatch, present map[string]bool, volume, checksum, method string, data []byte, z *bytes.Buffer, full bool) (uploaded int64, again, found bool, err error) {
	key := blockKey(volume, checksum, method)
	if !batch.claim(key) {
		return 0, false, false, nil
	}
	exists := present[key]
	if present == nil {
		if exists, err = s.driver.Exists(key); err != nil {
			return 0, false, false, fmt.Errorf("check block %s: %w", checksum, err)
		}
	}
	if exists && !full {
		batch.reused(key)
		return 0, false, true, nil
	}
	stored, err := compress(method, data, z)
	if err != nil {
		return 0, false, false, err
	}
	// An upload's error is the batch's, naming the block.
	if err := batch.write(key, stored); err != nil {
		return 0, false, false, err
	}
	return int64(len(stored)), exists, false, nil
}
