package backingimage

import (
	"errors"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/internal/diskconfig"
)

// DiskConfigFile is the file in which the node records a disk's identity.
const DiskConfigFile = diskconfig.File

// ErrWrongDisk is returned when the folder at a disk path is not the
// expected disk: another disk mounted there, or none at all.
var ErrWrongDisk = errors.New("wrong disk")

// ReadDiskUUID returns the UUID recorded in a disk's config.
func ReadDiskUUID(disk string) (string, error) {
	cfg, err := diskconfig.Read(disk)
	if err != nil {
		return "", err
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
