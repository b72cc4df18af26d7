package device

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"
	"github.com/cadence-storage/longhorn-manager/internal/hostexec"
)

// nbdfuseReadyTimeout bounds the wait for nbdfuse to serve its file.
const nbdfuseReadyTimeout = 30 * time.Second

// Tools are the programs a device is made with.
var Tools = []string{"nbdfuse", "nbdinfo", "losetup"}

// connect makes r.Endpoint a block device in r.FuseDir, recording each
// part in r (and r with save) as it is made, so that a failure part way
// can be undone by Release.
func connect(ctx context.Context, r *Record, save func(*Record) error, log *logrus.Entry) error {
	for _, tool := range Tools {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed on this node (nbdfuse, nbdinfo: Debian's libnbd-bin; losetup: util-linux): %w", tool, err)
		}
	}
	// The volume's size now; the device shows this much of the window.
	size, err := ExportSize(ctx, r.Endpoint)
	if err != nil {
		return err
	}
	dir := r.FuseDir
	// A FUSE mount left by an nbdfuse that died (after a reboot, a kill)
	// answers "transport endpoint is not connected": detach it.
	if isMountPoint(dir) {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	file := filepath.Join(dir, fuseFileName)
	pidFile, logFile := dir+".pid", dir+".log"
	_ = os.Remove(pidFile)
	logf, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// Not exec.CommandContext: nbdfuse must outlive the request. It reads
	// the export's window (engine/nbd), which covers any size the volume
	// may grow to, so the loop device can grow with no reconnect. A
	// session of its own: a signal to the caller's group does not end it.
	cmd := exec.Command("nbdfuse", "-P", pidFile, file, r.Endpoint+nbd.WindowSuffix)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start nbdfuse: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		// Reaps nbdfuse when it ends, so its pid does not linger as a
		// zombie that looks alive.
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	r.FuseFile, r.NbdfusePID, r.Window = file, cmd.Process.Pid, true
	if err := save(r); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"endpoint": r.Endpoint, "fuseFile": file, "pid": r.NbdfusePID}).Info("Started nbdfuse for the volume's NBD export")

	// nbdfuse writes its pid file once it serves the file.
	deadline := time.NewTimer(nbdfuseReadyTimeout)
	defer deadline.Stop()
	for ready := false; !ready; {
		if _, err := os.Stat(pidFile); err == nil {
			ready = true
			continue
		}
		select {
		case <-exited:
			out, _ := os.ReadFile(logFile)
			return fmt.Errorf("nbdfuse of %s exited before serving it: %s", r.Endpoint, strings.TrimSpace(string(out)))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("nbdfuse of %s did not serve it within %s", r.Endpoint, nbdfuseReadyTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}

	out, err := run(ctx, "losetup", "--find", "--show", "--sizelimit", strconv.FormatInt(size, 10), file)
	if err != nil {
		return err
	}
	r.Device = strings.TrimSpace(out)
	if err := save(r); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"device": r.Device, "fuseFile": file, "size": size}).Info("Made a loop device of the volume's export")
	return nil
}

// The host operations the full drill's devices run too (internal/rodevice).
var (
	run             = hostexec.Run
	loopBackingFile = hostexec.LoopBackingFile
	unmountFuse     = hostexec.UnmountFuse
)
