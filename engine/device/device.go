// Package device makes and keeps the block device of a staged volume on
// its node. The kernels this project runs on have no nbd module, so
// nbdfuse (libnbd-bin) exposes the volume's NBD export as a file in a FUSE
// mount, and a loop device makes that file a block device: mkfs, mount and
// a pod's raw block I/O go through it to the engine.
//
// A Manager keeps one record per volume in a folder of its own: the
// instance manager's (<dir>/devices), so that a device lives as long as
// the engines it reads and not as long as the CSI plugin's container, or
// the CSI driver's own (<state-dir>/devices) where no instance manager
// runs. Nothing read back from a record is trusted: the volume ID is
// checked against VolumeIDPattern, the paths against the folder, the loop
// device's name against /dev/loopN, and nbdfuse's pid against the
// process's command line.
package device

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// The kinds of a failed call, found with errors.Is, as they cross the
// instance manager's socket (engine/instancemanager/errors.go).
var (
	// ErrNotFound: the volume has no device here.
	ErrNotFound = errors.New("no device")
	// ErrInvalid: a volume ID or endpoint that cannot be one.
	ErrInvalid = errors.New("invalid")
	// ErrPrecondition: the volume has a device that is not the one asked
	// for (another endpoint, one that no longer stands, one that cannot
	// grow): unstage it first.
	ErrPrecondition = errors.New("precondition")
	// ErrInUse: the device is held open (mounted): it is not removed.
	ErrInUse = errors.New("in use")
	// ErrUnavailable: what keeps the devices (the instance manager) does
	// not answer.
	ErrUnavailable = errors.New("unavailable")
)

// VolumeIDPattern are the volume IDs a device is made for: Longhorn
// volume names, which are safe as file names (csi/nodestate's pattern).
var VolumeIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,239}$`)

// Status is what is known of a volume's device.
type Status struct {
	VolumeID string
	// Endpoint is the NBD URI of the volume's export the device reads.
	Endpoint string
	// Device is the block device, /dev/loopN ("" while it is not made);
	// Attached says it still reads the volume's export (its loop device
	// is not detached, nor another volume's since), whatever else no
	// longer stands: what is mounted on it is the volume's.
	Device   string
	Attached bool
	// Size is the device's size in bytes, as the kernel has it.
	Size int64
	// Window says nbdfuse reads the export's window (engine/nbd), so the
	// device can grow (Expand).
	Window bool
	// Healthy says every part stands: nbdfuse runs and is connected to
	// the export, its FUSE mount is there, the loop device reads it. Why
	// says what does not, when not.
	Healthy bool
	Why     string
}

// Service makes and keeps devices: a Manager in this process, or the
// instance manager's over its socket (instancemanager.DeviceClient).
type Service interface {
	// Stage makes the volume's device of the export at endpoint. A healthy
	// device of the same endpoint is returned as it is; any other device
	// of the volume is ErrPrecondition, saying why (Unstage it first).
	Stage(ctx context.Context, volumeID, endpoint string) (Status, error)
	// Unstage flushes and removes the volume's device and what it was
	// made of; a volume with none is done already. A device still held
	// open (mounted) is ErrInUse, and is kept.
	Unstage(ctx context.Context, volumeID string) error
	// Get is the volume's device; ErrNotFound when it has none.
	Get(ctx context.Context, volumeID string) (Status, error)
	List(ctx context.Context) ([]Status, error)
	// Expand grows the volume's device to its export's size now.
	Expand(ctx context.Context, volumeID string) (Status, error)
}

func checkVolumeID(id string) error {
	if !VolumeIDPattern.MatchString(id) {
		return fmt.Errorf("%w: %q is not a volume name", ErrInvalid, id)
	}
	return nil
}
