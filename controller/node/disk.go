package node

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/internal/diskconfig"
)

// diskInfo is what probing a disk's folder finds.
type diskInfo struct {
	Config         diskconfig.Config
	StorageMaximum int64
	StorageAvail   int64
}

// probeDisk reads a disk's identity and the space of its filesystem. A
// disk without an identity gets one: it is new to Longhorn.
func probeDisk(path, name string) (*diskInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("disk path %s: %w", path, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("disk path %s is not a folder", path)
	}
	cfg, err := diskconfig.Ensure(path, name)
	if err != nil {
		return nil, err
	}
	var sfs unix.Statfs_t
	if err := unix.Statfs(path, &sfs); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", path, err)
	}
	return &diskInfo{
		Config:         *cfg,
		StorageMaximum: int64(sfs.Blocks) * sfs.Bsize,
		StorageAvail:   int64(sfs.Bavail) * sfs.Bsize,
	}, nil
}
