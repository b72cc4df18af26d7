package csi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// stagedVolume is what NodeStageVolume made for a volume on this node,
// kept in a JSON file under the driver's state directory so that
// NodeUnstageVolume, and a driver that restarted in between, can undo it.
type stagedVolume struct {
	VolumeID string `json:"volumeID"`
	// Endpoint is the NBD URI the device reads and writes.
	Endpoint string `json:"endpoint"`
	// FuseDir is where nbdfuse mounts the export, as the file FuseFile;
	// NbdfusePID is its process, in a process group of its own.
	FuseDir    string `json:"fuseDir,omitempty"`
	FuseFile   string `json:"fuseFile,omitempty"`
	NbdfusePID int    `json:"nbdfusePID,omitempty"`
	// Window says nbdfuse reads the export's window (see engine/nbd),
	// which the loop device limits to the volume's size: such a device
	// grows (NodeExpandVolume). A stage made before has no window, and
	// grows only once staged again.
	Window bool `json:"window,omitempty"`
	// Device is the block device over the export: a loop device over
	// FuseFile.
	Device string `json:"device,omitempty"`
	// StagingPath is where the filesystem is mounted ("" for a block
	// volume, whose device alone is staged); FsType is its filesystem and
	// Formatted says NodeStageVolume made it.
	StagingPath string `json:"stagingPath,omitempty"`
	FsType      string `json:"fsType,omitempty"`
	Formatted   bool   `json:"formatted,omitempty"`
	Block       bool   `json:"block,omitempty"`
}

// volumeIDPattern are the volume IDs the Node service accepts: Longhorn
// volume names, which are safe as file names.
var volumeIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,239}$`)

// defaultStateDir keeps the Node service's state when Options say none.
const defaultStateDir = "/var/lib/longhorn-csi"

func (d *Driver) stateDir() string {
	dir := d.opts.StateDir
	if dir == "" {
		dir = defaultStateDir
	}
	// The loop device records its file's absolute path.
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

func (d *Driver) statePath(volumeID string) string {
	return filepath.Join(d.stateDir(), "volumes", volumeID+".json")
}

// fuseDir is where nbdfuse mounts a volume's export.
func (d *Driver) fuseDir(volumeID string) string {
	return filepath.Join(d.stateDir(), "fuse", volumeID)
}

// loadState reads a volume's state; nil, nil when it has none.
func (d *Driver) loadState(volumeID string) (*stagedVolume, error) {
	data, err := os.ReadFile(d.statePath(volumeID))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &stagedVolume{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("the state file %s is not JSON: %w", d.statePath(volumeID), err)
	}
	return st, nil
}

// saveState writes a volume's state atomically: a crash leaves the old
// file or the new one.
func (d *Driver) saveState(st *stagedVolume) error {
	path := d.statePath(st.VolumeID)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (d *Driver) removeState(volumeID string) error {
	err := os.Remove(d.statePath(volumeID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
