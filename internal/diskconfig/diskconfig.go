// Package diskconfig reads and writes the file on every Longhorn disk that
// records the disk's identity, so the disk keeps its UUID across restarts
// and a different disk mounted at the same path is recognised as
// different. The node controller writes it; the backing image servers
// check it before they touch a file on the disk.
package diskconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// File is the disk config's name in the disk's folder.
const File = "longhorn-disk.cfg"

// Config is the content of File.
type Config struct {
	DiskName string `json:"diskName"`
	DiskUUID string `json:"diskUUID"`
}

// Read reads the identity of the disk at path; fs.ErrNotExist when it has
// none.
func Read(path string) (*Config, error) {
	file := filepath.Join(path, File)
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cfg := &Config{}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("disk config %s is corrupt: %w", file, err)
	}
	if cfg.DiskUUID == "" {
		return nil, fmt.Errorf("disk config %s has no diskUUID", file)
	}
	return cfg, nil
}

// Ensure returns the disk's identity, writing a new one (with the given
// name and a fresh UUID) when the disk has none. The write is crash-safe:
// a temporary file is synced and renamed into place.
func Ensure(path, name string) (*Config, error) {
	cfg, err := Read(path)
	if err == nil {
		return cfg, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("create disk folder %s: %w", path, err)
	}
	cfg = &Config{DiskName: name, DiskUUID: uuid.NewString()}
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(path, File), data); err != nil {
		return nil, err
	}
	return cfg, nil
}
