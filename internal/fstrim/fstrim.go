// Package fstrim trims the filesystem a pod mounts from a volume, on the
// node where the volume is attached: the trimFilesystem action and the
// filesystem-trim recurring task. As Longhorn does, it finds the volume's
// mount in the host's mount table and runs fstrim on it; the discards go
// down the loop device and nbdfuse to the NBD export (TRIM) and the
// replicas punch the blocks out of their heads.
//
// The volume's device is the one the CSI Node service staged, read from
// its state directory (package csi/nodestate). A volume staged as a raw
// block device, or not staged on this node, has no filesystem to trim:
// that is an error saying so, and nothing is run.
package fstrim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/internal/hostexec"
	"github.com/cadence-storage/longhorn-manager/internal/mountinfo"
)

// ErrNoFilesystem is the cause of every refusal for want of a mounted
// filesystem: not staged here, staged as a block device, or not mounted.
var ErrNoFilesystem = errors.New("no mounted filesystem")

// Trimmer trims volumes' filesystems on this node.
type Trimmer struct {
	// StateDir is the CSI Node service's state directory
	// (nodestate.DefaultDir when empty).
	StateDir string
	// HostProc is where the host's /proc is mounted when the manager runs
	// in a container (/host/proc): the mount table is the host's
	// (HostProc/1/mountinfo) and fstrim runs in the host's mount
	// namespace through nsenter. Empty, the manager runs on the host: its
	// own mount table, fstrim run directly.
	HostProc string
}

// Result is what a trim did.
type Result struct {
	// MountPoint is where the filesystem trimmed is mounted.
	MountPoint string
	// Trimmed is the bytes fstrim reports it discarded: free space the
	// filesystem told the device of, not all of it in use before.
	Trimmed int64
}

// MountPoint is where the filesystem of volume's staged device is mounted
// on this node, in the mount table the trim acts in (the host's when
// HostProc is set); ErrNoFilesystem, saying why, when it has none.
func (tr Trimmer) MountPoint(volume string) (string, error) {
	st, err := nodestate.Load(nodestate.Dir(tr.StateDir), volume)
	if err != nil {
		return "", fmt.Errorf("read the CSI stage of volume %s: %w", volume, err)
	}
	switch {
	case st == nil:
		return "", fmt.Errorf("volume %s is not staged by the CSI driver on this node: %w (a filesystem is found where a pod mounts it)", volume, ErrNoFilesystem)
	case st.Block || st.StagingPath == "":
		return "", fmt.Errorf("volume %s is staged as a raw block device (%s): %w; whatever uses the device trims it (blkdiscard)", volume, st.Device, ErrNoFilesystem)
	case st.Device == "":
		return "", fmt.Errorf("volume %s's stage records no device: %w", volume, ErrNoFilesystem)
	}
	mounts, err := tr.mounts()
	if err != nil {
		return "", err
	}
	mp := pickMount(mounts, st.Device, deviceNumber(st.Device), st.StagingPath)
	if mp == "" {
		return "", fmt.Errorf("volume %s's device %s is mounted nowhere on this node: %w", volume, st.Device, ErrNoFilesystem)
	}
	return mp, nil
}

// Trim runs fstrim on the filesystem of volume's device.
func (tr Trimmer) Trim(ctx context.Context, volume string) (Result, error) {
	mp, err := tr.MountPoint(volume)
	if err != nil {
		return Result{}, err
	}
	args := []string{"-v", mp}
	name := "fstrim"
	if tr.HostProc != "" {
		args = append([]string{"--mount=" + filepath.Join(tr.HostProc, "1/ns/mnt"), "--", "fstrim"}, args...)
		name = "nsenter"
	}
	out, err := hostexec.Run(ctx, name, args...)
	if err != nil {
		return Result{MountPoint: mp}, fmt.Errorf("trim the filesystem of volume %s at %s: %w", volume, mp, err)
	}
	return Result{MountPoint: mp, Trimmed: trimmedBytes(out)}, nil
}

// mounts reads the mount table the trim acts in.
func (tr Trimmer) mounts() ([]mountinfo.Entry, error) {
	path := "/proc/self/mountinfo"
	if tr.HostProc != "" {
		path = filepath.Join(tr.HostProc, "1/mountinfo")
	}
	list, err := mountinfo.Read(path)
	if err != nil {
		return nil, fmt.Errorf("read the mount table: %w", err)
	}
	return list, nil
}

// deviceNumber is the major:minor of a block device, "" when it cannot be
// read (a container without the host's /dev: the source name decides).
func deviceNumber(device string) string {
	var st unix.Stat_t
	if err := unix.Stat(device, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return ""
	}
	return fmt.Sprintf("%d:%d", unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)))
}

// pickMount is a mount point of the device (by number when known, else by
// name), the staging path when it is one of them.
func pickMount(mounts []mountinfo.Entry, device, number, staging string) string {
	var first string
	for _, m := range mounts {
		if !(number != "" && m.Dev == number) && m.Source != device {
			continue
		}
		if m.Point == staging {
			return staging
		}
		if first == "" {
			first = m.Point
		}
	}
	return first
}

var trimmedPattern = regexp.MustCompile(`\((\d+) bytes\) trimmed`)

// trimmedBytes reads "/mnt: 64 MiB (67108864 bytes) trimmed" from fstrim
// -v; 0 when the output says no figure.
func trimmedBytes(out string) int64 {
	m := trimmedPattern.FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}
