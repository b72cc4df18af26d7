package csi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountEntry is a line of /proc/self/mountinfo.
type mountEntry struct {
	Point, FsType, Source, Options string
}

// mounts lists this process's mounts.
func mounts() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			continue
		}
		out = append(out, mountEntry{
			Point: unescapeMountinfo(fields[4]), Options: fields[5],
			FsType: fields[sep+1], Source: unescapeMountinfo(fields[sep+2]),
		})
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

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
