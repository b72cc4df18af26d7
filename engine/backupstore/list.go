package backupstore

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// Get returns one backup, checked (see validate.go).
func (s *Store) Get(volume, backup string) (*BackupInfo, error) {
	if err := checkNames(volume, backup); err != nil {
		return nil, err
	}
	data, err := s.driver.Read(backupCfgKey(volume, backup), maxBackupConfigSize)
	if errors.Is(err, ErrNotExist) {
		return nil, fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read backup %s of volume %s: %w", backup, volume, err)
	}
	return decodeBackup(data, volume, backup)
}

// backupNames lists the names of a volume's backup configs.
func (s *Store) backupNames(volume string) ([]string, error) {
	keys, err := s.driver.List(volumeKey(volume) + "/backups")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, k := range keys {
		base := path.Base(k)
		if strings.HasPrefix(base, "backup_") && strings.HasSuffix(base, ".cfg") {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(base, "backup_"), ".cfg"))
		}
	}
	return names, nil
}

// List returns a volume's backups, oldest first. It fails if any backup
// config cannot be used: a deletion must know every block in use.
func (s *Store) List(volume string) ([]*BackupInfo, error) {
	if err := checkName("volume", volume); err != nil {
		return nil, err
	}
	names, err := s.backupNames(volume)
	if err != nil {
		return nil, err
	}
	var out []*BackupInfo
	for _, name := range names {
		info, err := s.Get(volume, name)
		if errors.Is(err, ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sortBackups(out)
	return out, nil
}

// sortBackups orders backups by creation time, then name.
func sortBackups(list []*BackupInfo) {
	at := func(b *BackupInfo) time.Time {
		t, _ := time.Parse(time.RFC3339Nano, b.CreatedAt)
		return t
	}
	sort.Slice(list, func(i, j int) bool {
		if ti, tj := at(list[i]), at(list[j]); !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return list[i].Name < list[j].Name
	})
}

// Volume returns one volume's record; ErrNotExist when the store has none.
func (s *Store) Volume(name string) (*VolumeInfo, error) {
	if err := checkName("volume", name); err != nil {
		return nil, err
	}
	data, err := s.driver.Read(volumeCfgKey(name), maxRecordSize)
	if err != nil {
		return nil, err
	}
	return decodeVolume(data, name)
}
