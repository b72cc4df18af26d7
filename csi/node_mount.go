package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cadence-storage/longhorn-manager/internal/mountinfo"

	"golang.org/x/sys/unix"
)

// mountEntry is a line of this process's mount table.
type mountEntry = mountinfo.Entry

// mounts lists this process's mounts.
func mounts() ([]mountEntry, error) { return mountinfo.Self() }

// canonical is path made absolute with its symlinks resolved, as the
// kernel lists mount points; path itself when it does not exist.
func canonical(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// mountAt is the topmost mount at path, nil when nothing is mounted there.
func mountAt(path string) (*mountEntry, error) {
	list, err := mounts()
	if err != nil {
		return nil, err
	}
	path = canonical(path)
	var top *mountEntry
	for i := range list {
		if list[i].Point == path {
			top = &list[i]
		}
	}
	return top, nil
}

// isMountPoint says whether something is mounted at path.
func isMountPoint(path string) (bool, error) {
	m, err := mountAt(path)
	return m != nil, err
}

// mountsOf lists the mount points whose source is device.
func mountsOf(device string) ([]string, error) {
	list, err := mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range list {
		if m.Source == device {
			out = append(out, m.Point)
		}
	}
	return out, nil
}

// stageMountOptions are the options a volume's filesystem is staged
// with: the capability's flags and, for xfs, nouuid (as Longhorn mounts
// xfs). A clone or a restored backup holds its source's filesystem, UUID
// and all, and xfs refuses to mount a second filesystem of a UUID it has
// mounted already, so without it a clone staged on its source's node
// would not mount.
func stageMountOptions(fsType string, flags []string) []string {
	if fsType != "xfs" || slices.Contains(flags, "nouuid") {
		return flags
	}
	return append(slices.Clone(flags), "nouuid")
}

// mount runs mount(8): it takes filesystem options as the capability
// gives them, which the syscall does not.
func mount(ctx context.Context, source, target, fsType string, options []string) error {
	args := []string{}
	if fsType != "" {
		args = append(args, "-t", fsType)
	}
	if len(options) > 0 {
		args = append(args, "-o", strings.Join(options, ","))
	}
	if source != "" {
		args = append(args, source)
	}
	_, err := run(ctx, "mount", append(args, target)...)
	return err
}

// bindMount mounts source at target too, then makes it read-only when
// asked: a bind mount takes ro only by a remount.
func bindMount(ctx context.Context, source, target string, readOnly bool, options []string) error {
	if err := mount(ctx, source, target, "", []string{"bind"}); err != nil {
		return err
	}
	remount := []string{}
	for _, o := range options {
		if o != "bind" && o != "rw" && o != "ro" {
			remount = append(remount, o)
		}
	}
	if readOnly {
		remount = append(remount, "ro")
	}
	if len(remount) == 0 {
		return nil
	}
	if err := mount(ctx, "", target, "", append([]string{"remount", "bind"}, remount...)); err != nil {
		_ = unmountAll(target)
		return err
	}
	return nil
}

// unmountAll unmounts every mount stacked at path; nothing mounted there
// is no error.
func unmountAll(path string) error {
	for i := 0; i < 16; i++ {
		mounted, err := isMountPoint(path)
		if err != nil || !mounted {
			return err
		}
		if err := unix.Unmount(canonical(path), 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted after 16 unmounts", path)
}
