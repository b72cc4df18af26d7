// Package hostexec holds the few host operations both the CSI node
// service (csi) and the full drill's read-only devices (internal/rodevice)
// run on a volume's nbdfuse file and loop device: one copy of each.
package hostexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Run runs a short command and returns its output, or an error that says
// the command and what it printed.
func Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.String(), nil
}

// LoopBackingFile is the file loop device reads, empty when it reads none.
func LoopBackingFile(device string) string {
	data, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(device), "loop/backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// UnmountFuse unmounts nbdfuse's mount at dir, waiting out a moment's
// EBUSY (a loop device closing); one not mounted is done already.
func UnmountFuse(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		if err = unix.Unmount(dir, 0); err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("unmount nbdfuse at %s: %w", dir, err)
}
