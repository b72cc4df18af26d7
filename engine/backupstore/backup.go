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
	if req.Volume == "" || req.Snapshot == "" || req.Source == nil {
		return nil, stats, errors.New("a backup needs a volume, a snapshot and its content")
	}
	if err := checkName("volume", req.Volume); err != nil {
		return nil, stats, err
	}
	if req.Name != "" {
		if err := checkName("backup", req.Name); err != nil {
			return nil, stats, err
		}
	}
	size := req.Source.Size()
	if size <= 0 || size > MaxVolumeSize {
		return nil, stats, fmt.Errorf("snapshot %s: a size of %d bytes cannot be backed up (1 byte to 1 PiB)", req.Snapshot, size)
	}
	method := req.Compression
	if method == "" {
		method = s.compression
	}
	if err := CheckCompression(method); err != nil {
		return nil, stats, fmt.Errorf("backup compression: %w", err)
	}
	// The lock is taken before anything is read: from here until the
	// backup is visible, no deletion collects a block it may reuse.
	lock, err := s.lock(req.Volume, lockBackup)
	if err != nil {
		return nil, stats, err
	}
	defer lock.release()

	vol := VolumeInfo{Name: req.Volume, Size: size, CreatedAt: s.now().UTC().Format(time.RFC3339)}
	switch found, err := s.Volume(req.Volume); {
	case err == nil:
		vol = *found
	case errors.Is(err, ErrInvalid):
		// The volume record is an index of the backups; a new one
		// replaces it, and this backup is full.
		logrus.WithField("volume", req.Volume).WithError(err).Warn("Replacing an invalid volume record in the backup target")
	case !errors.Is(err, ErrNotExist):
		return nil, stats, fmt.Errorf("read volume %s in the backup target: %w", req.Volume, err)
	}
	vol.Size = size

	// Blocks the last backup holds, reusable where nothing changed: only
	// when it was taken from the very snapshot the changes are counted
	// from, and stored the same way (a block's file name says its method).
	var previous map[int64]string
	if req.Changed != nil && req.ChangedSinceID != "" && vol.LastBackupName != "" {
		if last, err := s.Get(req.Volume, vol.LastBackupName); err == nil && last.SnapshotName == req.ChangedSince &&
			last.SnapshotID == req.ChangedSinceID && last.VolumeSize == size && last.Compression == method {
			previous = map[int64]string{}
			for _, ref := range last.Blocks {
				previous[ref.Offset] = ref.Checksum
			}
		}
	}

	name := req.Name
	if name == "" {
		name = newBackupName()
	}
	if ok, err := s.driver.Exists(backupCfgKey(req.Volume, name)); err != nil {
		return nil, stats, err
	} else if ok {
		return nil, stats, fmt.Errorf("backup %s of volume %s already exists", name, req.Volume)
	}
	info := &BackupInfo{
		Name: name, VolumeName: req.Volume, VolumeSize: size, SnapshotName: req.Snapshot, SnapshotID: req.SnapshotID,
		SnapshotCreatedAt: req.SnapshotCreatedAt, Labels: req.Labels, Compression: method,
		BackingImageName: req.BackingImageName, BackingImageChecksum: req.BackingImageChecksum,
	}
	refs, err := s.storeBlocks(req, method, previous, &stats)
	if err != nil {
		return nil, stats, err
	}
	for i, ref := range refs {
		if ref != nil {
			info.Blocks = append(info.Blocks, *ref)
			info.Size += min(int64(BlockSize), size-int64(i)*BlockSize)
		}
	}
	// To the nanosecond, so backups taken within a second keep their order.
	info.CreatedAt = s.now().UTC().Format(time.RFC3339Nano)
	// The backup config goes last: until it exists the backup is invisible.
	// It may appear only while the lock surely held: a lock lost before
	// or during the write may have let a deletion free a reused block.
	if err := lock.check(); err != nil {
		return nil, stats, err
	}
	if err := s.writeJSON(backupCfgKey(req.Volume, info.Name), info); err != nil {
		return nil, stats, fmt.Errorf("write backup %s: %w", info.Name, err)
	}
	if err := lock.check(); err != nil {
		if delErr := s.driver.Delete(backupCfgKey(req.Volume, info.Name)); delErr != nil {
			return nil, stats, fmt.Errorf("%w; and the backup written meanwhile could not be taken back: %v", err, delErr)
		}
		return nil, stats, err
	}
	vol.LastBackupName, vol.LastBackupAt = info.Name, info.CreatedAt
	if err := s.writeJSON(volumeCfgKey(req.Volume), vol); err != nil {
		return nil, stats, fmt.Errorf("write volume %s in the backup target: %w", req.Volume, err)
	}
	if req.Progress != nil {
		req.Progress(100)
	}
	return info, stats, nil
}

// storeBlocks reads the snapshot's blocks and stores those the target
// lacks; previous holds the checksums (by offset) a block unchanged since
// the last backup reuses without being read. Reading stays sequential;
// checksums, compression and uploads run on req.Concurrency workers,
// which is where a backup spends its time.
func (s *Store) storeBlocks(req BackupRequest, method string, previous map[int64]string, stats *Stats) ([]*BlockRef, error) {
	size := req.Source.Size()
	blocks := (size + BlockSize - 1) / BlockSize
	refs := make([]*BlockRef, blocks)
	type job struct {
		index int64
		data  []byte
	}
	jobs := make(chan job)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards stats, refs, firstErr and done
		firstErr error
		done     int64
	)
	workers := req.Concurrency
	if workers <= 0 {
		workers = s.concurrency
	}
	free := make(chan []byte, workers+1)
	for i := 0; i < workers+1; i++ {
		free <- make([]byte, BlockSize)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var z bytes.Buffer
			for j := range jobs {
				checksum, uploaded, err := s.storeBlock(req.Volume, method, j.data, &z)
				mu.Lock()
				switch {
				case err != nil && firstErr == nil:
					firstErr = err
				case err == nil && uploaded > 0:
					stats.BytesUploaded += uploaded
					stats.BlocksUploaded++
				case err == nil:
					stats.BlocksReused++
				}
				if err == nil {
					refs[j.index] = &BlockRef{Offset: j.index * BlockSize, Checksum: checksum}
				}
				done++
				if req.Progress != nil {
					req.Progress(int(done * 100 / blocks))
				}
				mu.Unlock()
				free <- j.data[:cap(j.data)]
			}
		}()
	}
	var readErr error
	for i := int64(0); i < blocks; i++ {
		mu.Lock()
		failed := firstErr != nil
		mu.Unlock()
		if failed {
			break
		}
		off := i * BlockSize
		n := min(int64(BlockSize), size-off)
		if previous != nil && !changedIn(req.Changed, off, n) {
			if sum, ok := previous[off]; ok {
				mu.Lock()
				refs[i] = &BlockRef{Offset: off, Checksum: sum}
				stats.BlocksReused++
				mu.Unlock()
			}
			continue
		}
		if req.Allocated != nil && !changedIn(req.Allocated, off, n) {
			continue
		}
		data := (<-free)[:n]
		if _, err := req.Source.ReadAt(data, off); err != nil {
			readErr = fmt.Errorf("read snapshot %s at %d: %w", req.Snapshot, off, err)
			free <- data
			break
		}
		mu.Lock()
		stats.BytesRead += n
		mu.Unlock()
		if req.Allocated == nil && isZero(data) {
			free <- data
			continue
		}
		jobs <- job{index: i, data: data}
	}
	close(jobs)
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	return refs, firstErr
}

func changedIn(changed []bool, off, n int64) bool {
	for b := off / smallBlock; b < (off+n+smallBlock-1)/smallBlock && b < int64(len(changed)); b++ {
		if changed[b] {
			return true
		}
	}
	return false
}

// storeBlock checksums a block and stores it unless the store has it. A
// panic in it (a driver's, say) is the backup's error: the workers run
// outside any caller that could recover it.
func (s *Store) storeBlock(volume, method string, data []byte, z *bytes.Buffer) (checksum string, uploaded int64, err error) {
	defer panics.Recover(logrus.WithField("volume", volume), &err)
	sum := sha256.Sum256(data)
	checksum = hex.EncodeToString(sum[:])
	uploaded, err = s.putBlock(volume, checksum, method, data, z)
	return checksum, uploaded, err
}

// putBlock stores a block unless the store has it; it returns the bytes
// uploaded (0 when the block was there).
func (s *Store) putBlock(volume, checksum, method string, data []byte, z *bytes.Buffer) (int64, error) {
	key := blockKey(volume, checksum, method)
	exists, err := s.driver.Exists(key)
	if err != nil {
		return 0, fmt.Errorf("check block %s: %w", checksum, err)
	}
	if exists {
		return 0, nil
	}
	stored, err := compress(method, data, z)
	if err != nil {
		return 0, err
	}
	if err := s.driver.Write(key, stored); err != nil {
		return 0, fmt.Errorf("upload block %s: %w", checksum, err)
	}
	return int64(len(stored)), nil
}
