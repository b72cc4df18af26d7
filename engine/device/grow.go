package device

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ExportSize is the size of an NBD export, as nbdinfo reads it.
func ExportSize(ctx context.Context, uri string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := run(ctx, "nbdinfo", "--size", uri)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("nbdinfo --size %s: %q is not a size", uri, strings.TrimSpace(out))
	}
	return n, nil
}

// LoopSize is a loop device's size in bytes, as the kernel has it.
func LoopSize(device string) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(device), "size"))
	if err != nil {
		return 0, err
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: size %q: %w", device, data, err)
	}
	return sectors * 512, nil
}

// growLoop raises a loop device's size limit to size (LOOP_SET_STATUS64:
// the kernel shows the device's new size at once, nothing is
// reconnected, a mount on it stays), and waits until the kernel shows the
// device at that size.
func growLoop(device string, size int64) error {
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("LOOP_GET_STATUS64: %w", err)
	}
	info.Sizelimit = uint64(size)
	if err := unix.IoctlLoopSetStatus64(int(f.Fd()), info); err != nil {
		return fmt.Errorf("LOOP_SET_STATUS64 (size limit %d): %w", size, err)
	}
	return waitFor(10*time.Second, func() bool {
		n, err := LoopSize(device)
		return err == nil && n >= size
	})
}
