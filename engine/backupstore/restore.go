package backupstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/internal/panics"
)

// Restore writes a backup into dst, which must read as zeros where the
// backup holds no data (a new volume does). Every block is verified
// against its checksum; a dst that tells its size (an engine does) must
// hold the backup's volume.
func (s *Store) Restore(volume, backup string, dst io.WriterAt, progress func(int)) (*BackupInfo, error) {
	if err := checkNames(volume, backup); err != nil {
		return nil, err
	}
	// A restore holds the volume like a backup does, so the backup it
	// reads is not deleted under it.
	lock, err := s.lock(volume, lockRestore)
	if err != nil {
		return nil, err
	}
	defer lock.release()
	info, err := s.Get(volume, backup)
	if err != nil {
		return nil, err
	}
	// The block list must describe what was backed up before any of it
	// is written; each block is then checked against its name.
	if err := info.checkDigest(); err != nil {
		return nil, err
	}
	if sized, ok := dst.(interface{ Size() int64 }); ok && sized.Size() < info.VolumeSize {
		return nil, fmt.Errorf("backup %s of volume %s holds %d bytes, more than the %d of the volume restored into", backup, volume, info.VolumeSize, sized.Size())
	}
	if err := s.restoreBlocks(info, dst, progress); err != nil {
		return nil, err
	}
	if progress != nil {
		progress(100)
	}
	return info, nil
}

// restoreBlocks reads, decompresses and checks the backup's blocks on the
// store's workers (backup-concurrent-limit, as a backup's), at most one
// block in hand per worker, and writes each at its offset, one write at
// a time (dst need not take concurrent writes), in about the order of
// offsets. The first error stops the rest: no block is handed out after
// it, and it is what returns, once every worker has stopped.
func (s *Store) restoreBlocks(info *BackupInfo, dst io.WriterAt, progress func(int)) error {
	workers := s.concurrency
	if workers <= 0 {
		workers = DefaultConcurrency
	}
	workers = min(workers, len(info.Blocks))
	work := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex // guards firstErr and done, and serializes the writes and progress
		firstErr error
		done     int
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d blockDecoder
			for i := range work {
				if failed() {
					continue
				}
				ref := &info.Blocks[i]
				data, err := s.restoreBlock(&d, info, ref)
				mu.Lock()
				if err == nil && firstErr == nil {
					err = writeRestored(dst, info, ref, data, &done, progress)
				}
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for i := range info.Blocks {
		if failed() {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

// writeRestored writes a checked block at its offset and reports the
// progress; the caller holds the restore's lock. A panic in the write or
// the progress (done on a worker, where no caller recovers it) is the
// restore's error, never the process's.
func writeRestored(dst io.WriterAt, info *BackupInfo, ref *BlockRef, data []byte, done *int, progress func(int)) (err error) {
	defer panics.Recover(logrus.WithFields(logrus.Fields{"restore": info.Name, "from": info.VolumeName, "offset": ref.Offset}), &err)
	if _, err := dst.WriteAt(data, ref.Offset); err != nil {
		return fmt.Errorf("backup %s: write at %d: %w", info.Name, ref.Offset, err)
	}
	*done++
	if progress != nil {
		progress(*done * 100 / len(info.Blocks))
	}
	return nil
}

// restoreBlock reads one block and returns its content, checked against
// its name; the content is in d's buffer. A panic in it (a decoder's on
// hostile input) is the block's corruption, never the manager's.
func (s *Store) restoreBlock(d *blockDecoder, info *BackupInfo, ref *BlockRef) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			logrus.WithFields(logrus.Fields{"block": ref.Checksum, "panic": fmt.Sprint(r), "stack": string(debug.Stack())}).Error("Recovered a panic restoring a backup block; the block counts as corrupt")
			data, err = nil, fmt.Errorf("backup %s: block %s at offset %d is corrupt: decoding it panicked: %v", info.Name, ref.Checksum, ref.Offset, r)
			*d = blockDecoder{} // its decoders' state is unknown

		}
	}()
	z, err := s.driver.Read(blockKey(info.VolumeName, ref.Checksum, info.Compression), maxBlockFileSize)
	if err != nil {
		return nil, fmt.Errorf("backup %s: read block %s at offset %d: %w", info.Name, ref.Checksum, ref.Offset, err)
	}
	data, err = d.decode(info.Compression, z, min(int64(BlockSize), info.VolumeSize-ref.Offset))
	if err != nil {
		return nil, fmt.Errorf("backup %s: block %s at offset %d is corrupt: %v", info.Name, ref.Checksum, ref.Offset, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.Checksum {
		return nil, fmt.Errorf("backup %s: block %s at offset %d does not match its checksum", info.Name, ref.Checksum, ref.Offset)
	}
	return data, nil
}
