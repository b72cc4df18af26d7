// Package nodestate is what the CSI Node service remembers of each volume
// it staged on a node: one JSON file per volume under the driver's state
// directory. The Node service writes it (package csi); the manager on the
// same node reads it to find a volume's mounted filesystem (the
// trimFilesystem action, package internal/fstrim).
package nodestate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// DefaultDir keeps the Node service's state when no directory is given.
const DefaultDir = "/var/lib/longhorn-csi"

// Who keeps a staged volume's device (Volume.DeviceOwner).
const (
	// OwnerLegacy: the driver's own nbdfuse, recorded in the state file
	// itself (FuseDir, FuseFile, NbdfusePID, Window), as drivers made
	// devices before engine/device; such a stage is undone and grown by
	// the same code, and never made anew.
	OwnerLegacy = ""
	// OwnerDriver: the driver's engine/device Manager, in the state
	// directory's devices folder (no instance manager on the node).
	OwnerDriver = "driver"
	// OwnerInstanceManager: the node's instance manager, over its socket.
	OwnerInstanceManager = "instance-manager"
)

// Volume is what NodeStageVolume made for a volume on this node, so that
// NodeUnstageVolume, and a driver that restarted in between, can undo it.
type Volume struct {
	VolumeID string `json:"volumeID"`
	// Endpoint is the NBD URI the device reads and writes.
	Endpoint string `json:"endpoint"`
	// DeviceOwner is who keeps the device (OwnerDriver,
	// OwnerInstanceManager, or OwnerLegacy). It is written before the
	// device is asked for: a driver that dies meanwhile knows where to
	// undo it.
	DeviceOwner string `json:"deviceOwner,omitempty"`
	// InstanceManager names the instance manager that keeps the device,
	// for OwnerInstanceManager: the one the volume's engine runs in (a
	// node has two while an upgrade rolls). "" is the one serving in the
	// driver's instance manager folder itself.
	InstanceManager string `json:"instanceManager,omitempty"`
	// FuseDir is where nbdfuse mounts the export, as the file FuseFile;
	// NbdfusePID is its process, in a process group of its own; Window
	// says it reads the export's window (see engine/nbd), so the device
	// can grow. Only a legacy stage has them (engine/device.Record's).
	FuseDir    string `json:"fuseDir,omitempty"`
	FuseFile   string `json:"fuseFile,omitempty"`
	NbdfusePID int    `json:"nbdfusePID,omitempty"`
	Window     bool   `json:"window,omitempty"`
	// Device is the block device over the export, /dev/loopN.
	Device string `json:"device,omitempty"`
	// StagingPath is where the filesystem is mounted ("" for a block
	// volume, whose device alone is staged); FsType is its filesystem and
	// Formatted says NodeStageVolume made it.
	StagingPath string `json:"stagingPath,omitempty"`
	FsType      string `json:"fsType,omitempty"`
	Formatted   bool   `json:"formatted,omitempty"`
	Block       bool   `json:"block,omitempty"`
	// Publishes are the target paths the volume is published at, each
	// saying whether it was for a single writer (ReadWriteOncePod): while
	// one such is mounted, the volume is published nowhere else.
	Publishes []Publish `json:"publishes,omitempty"`
}

// Publish is one NodePublishVolume of a staged volume.
type Publish struct {
	Target       string `json:"target"`
	SingleWriter bool   `json:"singleWriter,omitempty"`
}

// Describe sums up a stage for messages and logs.
func (v *Volume) Describe() string {
	if v.Block {
		return fmt.Sprintf("block device %s", v.Device)
	}
	return fmt.Sprintf("%s on %s at %s", v.FsType, v.Device, v.StagingPath)
}

// IDPattern are the volume IDs the Node service accepts: Longhorn volume
// names, which are safe as file names.
var IDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,239}$`)

// Dir is the state directory dir names (DefaultDir when empty), absolute:
// a loop device records its file's absolute path.
func Dir(dir string) string {
	if dir == "" {
		dir = DefaultDir
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return dir
}

// Path is the state file of a volume in the state directory dir.
func Path(dir, volumeID string) string {
	return filepath.Join(dir, "volumes", volumeID+".json")
}

// Load reads a volume's state from dir; nil, nil when it has none. An ID
// that is no volume name is an error (it would name another file).
func Load(dir, volumeID string) (*Volume, error) {
	if !IDPattern.MatchString(volumeID) {
		return nil, fmt.Errorf("%q is not a volume name", volumeID)
	}
	path := Path(dir, volumeID)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v := &Volume{}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("the state file %s is not JSON: %w", path, err)
	}
	return v, nil
}

// Save writes a volume's state into dir atomically: a crash leaves the
// old file or the new one.
func Save(dir string, v *Volume) error {
	if !IDPattern.MatchString(v.VolumeID) {
		return fmt.Errorf("%q is not a volume name", v.VolumeID)
	}
	path := Path(dir, v.VolumeID)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data)
}

// Remove deletes a volume's state from dir; none is done already.
func Remove(dir, volumeID string) error {
	if !IDPattern.MatchString(volumeID) {
		return fmt.Errorf("%q is not a volume name", volumeID)
	}
	err := os.Remove(Path(dir, volumeID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
