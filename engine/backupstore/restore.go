package backupstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
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
	for i, ref := range info.Blocks {
		z, err := s.driver.Read(blockKey(volume, ref.Checksum, info.Compression), maxBlockFileSize)
		if err != nil {
			return nil, fmt.Errorf("backup %s: read block %s: %w", backup, ref.Checksum, err)
		}
		data, err := decompress(info.Compression, z, min(int64(BlockSize), info.VolumeSize-ref.Offset))
		if err != nil {
			return nil, fmt.Errorf("backup %s: block %s at offset %d is corrupt: %v", backup, ref.Checksum, ref.Offset, err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != ref.Checksum {
			return nil, fmt.Errorf("backup %s: block %s does not match its checksum", backup, ref.Checksum)
		}
		if _, err := dst.WriteAt(data, ref.Offset); err != nil {
			return nil, fmt.Errorf("backup %s: write at %d: %w", backup, ref.Offset, err)
		}
		if progress != nil {
			progress((i + 1) * 100 / len(info.Blocks))
		}
	}
	if progress != nil {
		progress(100)
	}
	return info, nil
}
