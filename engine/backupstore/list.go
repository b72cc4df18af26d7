package backupstore

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// Get returns one backup.
func (s *Store) Get(volume, backup string) (*BackupInfo, error) {
	var info BackupInfo
	if err := s.readJSON(backupCfgKey(volume, backup), &info); err != nil {
		if errors.Is(err, ErrNotExist) {
			return nil, fmt.Errorf("backup %s of volume %s: %w", backup, volume, ErrNotExist)
		}
		return nil, err
	}
	return &info, nil
}

// List returns a volume's backups, oldest first.
func (s *Store) List(volume string) ([]*BackupInfo, error) {
	keys, err := s.driver.List(volumeKey(volume) + "/backups")
	if err != nil {
		return nil, err
	}
	var out []*BackupInfo
	for _, k := range keys {
		base := path.Base(k)
		if !strings.HasPrefix(base, "backup_") || !strings.HasSuffix(base, ".cfg") {
			continue
		}
		info, err := s.Get(volume, strings.TrimSuffix(strings.TrimPrefix(base, "backup_"), ".cfg"))
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Volume returns one volume's record; ErrNotExist when the store has none.
func (s *Store) Volume(name string) (*VolumeInfo, error) {
	var v VolumeInfo
	if err := s.readJSON(volumeCfgKey(name), &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Volumes lists the volumes the store holds backups of.
func (s *Store) Volumes() ([]VolumeInfo, error) {
	keys, err := s.driver.List("backupstore/volumes")
	if err != nil {
		return nil, err
	}
	var out []VolumeInfo
	for _, k := range keys {
		var v VolumeInfo
		if err := s.readJSON(k+"/volume.cfg", &v); err != nil {
			if errors.Is(err, ErrNotExist) {
				continue
			}
			return nil, err
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
