package backupstore

import (
	"fmt"
	"path"
)

// Delete removes a backup, then the blocks no remaining backup uses.
func (s *Store) Delete(volume, backup string) error {
	if err := checkNames(volume, backup); err != nil {
		return err
	}
	lock, err := s.lock(volume, lockDelete)
	if err != nil {
		return err
	}
	defer lock.release()
	if ok, err := s.driver.Exists(backupCfgKey(volume, backup)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
	}
	if err := lock.check(); err != nil {
		return err
	}
	if err := s.driver.Delete(backupCfgKey(volume, backup)); err != nil {
		return fmt.Errorf("delete backup %s: %w", backup, err)
	}
	remaining, err := s.List(volume)
	if err != nil {
		return err
	}
	if vol, err := s.Volume(volume); err == nil && vol.LastBackupName == backup {
		vol.LastBackupName, vol.LastBackupAt = "", ""
		if n := len(remaining); n > 0 {
			vol.LastBackupName, vol.LastBackupAt = remaining[n-1].Name, remaining[n-1].CreatedAt
		}
		if err := s.writeJSON(volumeCfgKey(volume), vol); err != nil {
			return err
		}
	}
	if err := s.collectBlocks(volume, remaining, lock); err != nil {
		return err
	}
	return s.removeStaging(volume, lock)
}

// DeleteVolume removes every backup of a volume, its blocks and its
// record, under the one deletion lock a backup's deletion takes: it gives
// up (ErrLocked) while a backup or restore of the volume runs anywhere.
// It returns how many backups it deleted; one that fails stops it, and
// what it did not reach stays whole (configs go first, then the blocks
// none of the remaining configs uses, then the record).
func (s *Store) DeleteVolume(volume string) (deleted int, err error) {
	if err := checkName("volume", volume); err != nil {
		return 0, err
	}
	lock, err := s.lock(volume, lockDelete)
	if err != nil {
		return 0, err
	}
	defer lock.release()
	names, err := s.backupNames(volume)
	if err != nil {
		return 0, err
	}
	for _, name := range names {
		if err := lock.check(); err != nil {
			return deleted, err
		}
		if err := s.driver.Delete(backupCfgKey(volume, name)); err != nil {
			return deleted, fmt.Errorf("delete backup %s: %w", name, err)
		}
		deleted++
	}
	if err := s.collectBlocks(volume, nil, lock); err != nil {
		return deleted, err
	}
	if err := lock.check(); err != nil {
		return deleted, err
	}
	if err := s.driver.Delete(volumeCfgKey(volume)); err != nil {
		return deleted, fmt.Errorf("delete the record of volume %s: %w", volume, err)
	}
	return deleted, s.removeStaging(volume, lock)
}

// stagingRemover is a Driver that keeps the blocks of running backups in a
// staging area (FileDriver).
type stagingRemover interface {
	removeStaging(volume string) error
}

// removeStaging removes what backups of the volume that crashed left
// staged. A deletion runs while no backup of the volume does (lock.go),
// so all of it is left over; a backup whose lock went stale and that
// comes back finds its staged blocks gone and fails.
func (s *Store) removeStaging(volume string, lock *heldLock) error {
	r, ok := s.driver.(stagingRemover)
	if !ok {
		return nil
	}
	if err := lock.check(); err != nil {
		return err
	}
	if err := r.removeStaging(volume); err != nil {
		return fmt.Errorf("remove blocks left staged by interrupted backups: %w", err)
	}
	return nil
}

// collectBlocks deletes the blocks none of the backups uses. A crash in
// the middle leaves unused blocks, which the next deletion collects.
func (s *Store) collectBlocks(volume string, backups []*BackupInfo, lock *heldLock) error {
	used := map[string]bool{} // block file names
	for _, b := range backups {
		for _, ref := range b.Blocks {
			used[path.Base(blockKey(volume, ref.Checksum, b.Compression))] = true
		}
	}
	files, err := s.blockFiles(volume)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, _, ours := checksumOfBlockFile(path.Base(f)); ours && !used[path.Base(f)] {
			if err := lock.check(); err != nil {
				return err
			}
			if err := s.driver.Delete(f); err != nil {
				return fmt.Errorf("free block %s: %w", f, err)
			}
		}
	}
	return nil
}

// blockFiles lists every block file of a volume: in one listing where the
// driver can (S3), else folder by folder.
func (s *Store) blockFiles(volume string) ([]string, error) {
	prefix := volumeKey(volume) + "/blocks"
	if d, ok := s.driver.(deepLister); ok {
		return d.ListAll(prefix)
	}
	var out []string
	level1, err := s.driver.List(prefix)
	if err != nil {
		return nil, err
	}
	for _, d1 := range level1 {
		level2, err := s.driver.List(d1)
		if err != nil {
			return nil, err
		}
		for _, d2 := range level2 {
			files, err := s.driver.List(d2)
			if err != nil {
				return nil, err
			}
			out = append(out, files...)
		}
	}
	return out, nil
}
