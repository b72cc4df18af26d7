package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// diskConfigFile is the file on every disk that records the disk's
// identity, so the disk keeps its UUID across restarts and a different
// disk mounted at the same path is recognised as different.
const diskConfigFile = "longhorn-disk.cfg"

// diskConfig is the content of diskConfigFile.
type diskConfig struct {
	DiskName string `json:"diskName"`
	DiskUUID string `json:"diskUUID"`
}

// diskInfo is what probing a disk's folder finds.
type diskInfo struct {
	Config         diskConfig
	StorageMaximum int64
	StorageAvail   int64
}

// readDiskConfig reads a disk's identity; fs.ErrNotExist when it has none.
func readDiskConfig(path string) (*diskConfig, error) {
	data, err := os.ReadFile(filepath.Join(path, diskConfigFile))
	if err != nil {
		return nil, err
	}
	cfg := &diskConfig{}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("disk config %s is corrupt: %w", filepath.Join(path, diskConfigFile), err)
	}
	if cfg.DiskUUID == "" {
		return nil, fmt.Errorf("disk config %s has no diskUUID", filepath.Join(path, diskConfigFile))
	}
	return cfg, nil
}

// ensureDiskConfig returns the disk's identity, writing a new one (with the
// given name and a fresh UUID) when the disk has none. The write is
// crash-safe: a temporary file is synced and renamed into place.
func ensureDiskConfig(path, name string) (*diskConfig, error) {
	cfg, err := readDiskConfig(path)
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create disk folder %s: %w", path, err)
	}
	cfg = &diskConfig{DiskName: name, DiskUUID: uuid.NewString()}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(path, diskConfigFile), data); err != nil {
		return nil, err
	}
	return cfg, nil
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
	cfg, err := ensureDiskConfig(path, name)
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
