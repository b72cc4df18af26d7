package backingimage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DiskConfigFile is the file in which the node records a disk's identity
// (see controller/node_disk.go).
const DiskConfigFile = "longhorn-disk.cfg"

// ErrWrongDisk is returned when the folder at a disk path is not the
// expected disk: another disk mounted there, or none at all.
var ErrWrongDisk = errors.New("wrong disk")

// ReadDiskUUID returns the UUID recorded in a disk's longhorn-disk.cfg.
func ReadDiskUUID(disk string) (string, error) {
	data, err := os.ReadFile(filepath.Join(disk, DiskConfigFile))
	if err != nil {
		return "", err
	}
	var cfg struct {
		DiskUUID string `json:"diskUUID"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("disk config %s is corrupt: %w", filepath.Join(disk, DiskConfigFile), err)
	}
	if cfg.DiskUUID == "" {
		return "", fmt.Errorf("disk config %s has no diskUUID", filepath.Join(disk, DiskConfigFile))
	}
	return cfg.DiskUUID, nil
}

// CheckDisk fails with ErrWrongDisk unless the disk at path has the given
// UUID. It is called before any file on the disk is touched, so a disk
// swapped under a running server is never written to or cleaned.
func CheckDisk(path, uuid string) error {
	got, err := ReadDiskUUID(path)
	if err != nil {
		return fmt.Errorf("%w: disk %s: %v", ErrWrongDisk, path, err)
	}
	if got != uuid {
		return fmt.Errorf("%w: disk %s has UUID %s, want %s", ErrWrongDisk, path, got, uuid)
	}
	return nil
}
