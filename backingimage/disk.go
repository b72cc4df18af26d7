package backingimage

import (
	"errors"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/internal/diskconfig"
	"golang.org/x/sys/unix"
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

// FreeBytes is the room left on the file system of path for an
// unprivileged writer.
func FreeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
