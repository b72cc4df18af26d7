// Package rodevice makes a read-only block device of an NBD export, the
// way the CSI node service makes a volume's device (nbdfuse serves the
// export as a file in a FUSE mount, a loop device makes the file a block
// device), but read-only at both steps: nbdfuse -r, losetup --read-only.
// A filesystem's own check (e2fsck -n, xfs_repair -n) runs on it, and
// nothing it does can write the volume.
//
// Each device lives in a folder of its own under a root; Sweep undoes
// whatever a process that died left there.
package rodevice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/internal/hostexec"
)

// readyTimeout bounds the wait for nbdfuse to serve its file.
const readyTimeout = 30 * time.Second

// Device is a read-only loop device of an NBD export.
type Device struct {
	// Path is the loop device, /dev/loopN.
	Path string
	dir  string // the folder of the FUSE mount, its pid file and log
	file string // the file nbdfuse serves
	cmd  *exec.Cmd
	done chan struct{}
}

// Open makes a read-only block device of the export at endpoint (an NBD
// URI), in dir, a folder of root that it owns. On an error, what was made
// is undone.
func Open(ctx context.Context, root, name, endpoint string) (_ *Device, err error) {
	for _, tool := range []string{"nbdfuse", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s is not installed (nbdfuse: Debian's libnbd-bin; losetup: util-linux): %w", tool, err)
		}
	}
	dir := filepath.Join(root, name)
	sweepDir(dir)
	if err := os.MkdirAll(filepath.Join(dir, "mnt"), 0o700); err != nil {
		return nil, err
	}
	d := &Device{dir: dir, file: filepath.Join(dir, "mnt", "disk"), done: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = d.Close()
		}
	}()
	logf, err := os.OpenFile(filepath.Join(dir, "nbdfuse.log"), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	pidFile := filepath.Join(dir, "nbdfuse.pid")
	d.cmd = exec.Command("nbdfuse", "-r", "-P", pidFile, d.file, endpoint)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	// A session of its own: a signal to the manager's group does not end
	// it half way; Close or Sweep does.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		close(d.done)
		return nil, fmt.Errorf("start nbdfuse: %w", err)
	}
	go func() {
		_ = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		select {
		case <-d.done:
			out, _ := os.ReadFile(filepath.Join(dir, "nbdfuse.log"))
			return nil, fmt.Errorf("nbdfuse of %s exited before serving it: %s", endpoint, strings.TrimSpace(string(out)))
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, fmt.Errorf("nbdfuse of %s did not serve it within %s", endpoint, readyTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
	out, err := run(ctx, "losetup", "--find", "--show", "--read-only", d.file)
	if err != nil {
		return nil, err
	}
	d.Path = strings.TrimSpace(out)
	return d, nil
}

// ReadAt reads the device from off.
func (d *Device) ReadAt(p []byte, off int64) (int, error) {
	f, err := os.Open(d.Path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.ReadAt(p, off)
}

// Close detaches the loop device, unmounts the FUSE file, ends nbdfuse
// and removes the folder; each step whatever became of the others.
func (d *Device) Close() error {
	var errs []error
	if d.Path != "" {
		if _, err := run(context.Background(), "losetup", "-d", d.Path); err != nil && loopBackingFile(d.Path) == d.file {
			errs = append(errs, err)
		}
		d.Path = ""
	}
	if err := unmount(filepath.Join(d.dir, "mnt")); err != nil {
		errs = append(errs, err)
	}
	if d.cmd != nil && d.cmd.Process != nil {
		select {
		case <-d.done:
		case <-time.After(5 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
	if len(errs) == 0 {
		_ = os.RemoveAll(d.dir)
	}
	return errors.Join(errs...)
}

// Sweep undoes the devices a process that died left under root: their
// loop devices detached, FUSE mounts unmounted, nbdfuse ended, folders
// removed. It returns the folders it swept.
func Sweep(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var swept []string
	for _, e := range entries {
		if e.IsDir() {
			sweepDir(filepath.Join(root, e.Name()))
			swept = append(swept, e.Name())
		}
	}
	return swept
}

func sweepDir(dir string) {
	file := filepath.Join(dir, "mnt", "disk")
	for _, dev := range loopsOf(file) {
		_, _ = run(context.Background(), "losetup", "-d", dev)
	}
	_ = unix.Unmount(filepath.Join(dir, "mnt"), unix.MNT_DETACH)
	if data, err := os.ReadFile(filepath.Join(dir, "nbdfuse.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && isNbdfuse(pid, file) {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
	_ = os.RemoveAll(dir)
}

// loopsOf lists the loop devices that read file.
func loopsOf(file string) []string {
	matches, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err == nil && strings.TrimSpace(string(data)) == file {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(m))))
		}
	}
	return out
}

// isNbdfuse says whether pid is nbdfuse serving file, not a process that
// took the pid over.
func isNbdfuse(pid int, file string) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	return len(args) > 0 && filepath.Base(string(args[0])) == "nbdfuse" && bytes.Contains(cmdline, []byte(file))
}

// The host operations the CSI node service runs too (csi).
var (
	run             = hostexec.Run
	loopBackingFile = hostexec.LoopBackingFile
	unmount         = hostexec.UnmountFuse
)
