package csi

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

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/engine/nbd"
	"github.com/cadence-storage/longhorn-manager/internal/hostexec"
)

// The device of a staged volume. Where the kernel has no nbd module, as
// on this project's machines, nbdfuse (libnbd-bin) exposes the volume's
// NBD export as a file in a FUSE mount and a loop device makes that file
// a block device: mkfs, mount and a pod's raw block I/O go through it to
// the engine. nbdfuse runs in a session of its own, so it outlives the
// gRPC call that started it and the driver process itself; the state file
// records its pid and mount so that NodeUnstageVolume, or a restarted
// driver, can stop it.

// nbdfuseReadyTimeout bounds the wait for nbdfuse to serve its file.
const nbdfuseReadyTimeout = 30 * time.Second

// connectDevice makes st.Endpoint a block device, recording each part in
// st (and st in its state file) as it is made, so that a failure part way
// can be undone by disconnectDevice.
func (d *Driver) connectDevice(ctx context.Context, st *stagedVolume, log *logrus.Entry) error {
	for _, tool := range []string{"nbdfuse", "nbdinfo", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed on this node (nbdfuse, nbdinfo: Debian's libnbd-bin; losetup: util-linux): %w", tool, err)
		}
	}
	// The volume's size now; the device shows this much of the window.
	size, err := exportSize(ctx, st.Endpoint)
	if err != nil {
		return err
	}
	dir := d.fuseDir(st.VolumeID)
	// A FUSE mount left by an nbdfuse that died (after a reboot, a kill)
	// answers "transport endpoint is not connected": detach it.
	if mounted, _ := isMountPoint(dir); mounted {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	file := filepath.Join(dir, "disk")
	pidFile, logFile := dir+".pid", dir+".log"
	_ = os.Remove(pidFile)
	logf, err := os.OpenFile(logFile, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// Not exec.CommandContext: nbdfuse must outlive the request. It reads
	// the export's window (engine/nbd), which covers any size the volume
	// may grow to, so the loop device can grow with no reconnect.
	cmd := exec.Command("nbdfuse", "-P", pidFile, file, st.Endpoint+nbd.WindowSuffix)
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
	st.FuseDir, st.FuseFile, st.NbdfusePID, st.Window = dir, file, cmd.Process.Pid, true
	if err := d.saveState(st); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"endpoint": st.Endpoint, "fuseFile": file, "pid": st.NbdfusePID}).Info("Started nbdfuse for the volume's NBD export")

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
			return fmt.Errorf("nbdfuse of %s exited before serving it: %s", st.Endpoint, strings.TrimSpace(string(out)))
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("nbdfuse of %s did not serve it within %s", st.Endpoint, nbdfuseReadyTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}

	out, err := run(ctx, "losetup", "--find", "--show", "--sizelimit", strconv.FormatInt(size, 10), file)
	if err != nil {
		return err
	}
	st.Device = strings.TrimSpace(out)
	if err := d.saveState(st); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"device": st.Device, "fuseFile": file, "size": size}).Info("Made a loop device of the volume's export")
	return nil
}

// deviceHealthy says whether the device st records still stands: its
// nbdfuse runs, its FUSE mount is there and its loop device reads it.
func deviceHealthy(st *stagedVolume) bool {
	if st.Device == "" || !isOurNbdfuse(st) {
		return false
	}
	if mounted, _ := isMountPoint(st.FuseDir); !mounted {
		return false
	}
	return loopBackingFile(st.Device) == st.FuseFile
}

// disconnectDevice undoes connectDevice, whatever part of it was done or
// is still there: it detaches the loop device, flushing it, unmounts the
// FUSE file and ends nbdfuse.
func (d *Driver) disconnectDevice(st *stagedVolume, log *logrus.Entry) error {
	if st.Device != "" && st.FuseFile != "" && loopBackingFile(st.Device) == st.FuseFile {
		syncFile(st.Device)
		if _, err := run(context.Background(), "losetup", "-d", st.Device); err != nil {
			return err
		}
		// The kernel lets a loop device go once its last user closes it.
		if err := waitFor(10*time.Second, func() bool { return loopBackingFile(st.Device) != st.FuseFile }); err != nil {
			return fmt.Errorf("loop device %s still reads %s: something holds it open", st.Device, st.FuseFile)
		}
		log.WithField("device", st.Device).Info("Detached the loop device")
	}
	if st.FuseDir != "" {
		if mounted, _ := isMountPoint(st.FuseDir); mounted {
			// Writes nbdfuse holds reach the engine before it stops.
			syncFile(st.FuseFile)
			if err := unmountFuse(st.FuseDir); err != nil {
				return err
			}
			log.WithField("fuseDir", st.FuseDir).Info("Unmounted the volume's nbdfuse")
		}
	}
	if isOurNbdfuse(st) {
		// nbdfuse ends once unmounted; one that does not is stopped.
		if err := waitFor(10*time.Second, func() bool { return !isOurNbdfuse(st) }); err != nil {
			_ = syscall.Kill(-st.NbdfusePID, syscall.SIGTERM)
			if err := waitFor(5*time.Second, func() bool { return !isOurNbdfuse(st) }); err != nil {
				_ = syscall.Kill(-st.NbdfusePID, syscall.SIGKILL)
			}
		}
		if mounted, _ := isMountPoint(st.FuseDir); mounted {
			_ = unix.Unmount(st.FuseDir, unix.MNT_DETACH)
		}
	}
	if st.FuseDir != "" {
		for _, p := range []string{st.FuseDir, st.FuseDir + ".pid", st.FuseDir + ".log"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.WithError(err).WithField("path", p).Warn("Could not remove what nbdfuse left")
			}
		}
	}
	return nil
}

// isOurNbdfuse says whether st's nbdfuse still runs: the pid is alive
// and is nbdfuse serving st's file, not a process that took the pid over.
func isOurNbdfuse(st *stagedVolume) bool {
	if st.NbdfusePID <= 0 || st.FuseFile == "" {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(st.NbdfusePID) + "/cmdline")
	if err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(st.NbdfusePID) + "/stat")
	if err != nil || procState(stat) == "Z" {
		return false
	}
	args := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
	return len(args) > 0 && filepath.Base(string(args[0])) == "nbdfuse" && bytes.Contains(cmdline, []byte(st.FuseFile))
}

// procState is the state letter of a /proc/PID/stat.
func procState(stat []byte) string {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return ""
	}
	return string(stat[i+2])
}

// syncFile flushes what the kernel holds for a file or device.
func syncFile(path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	_ = f.Sync()
	f.Close()
}

// waitFor polls cond every 50ms for up to timeout.
func waitFor(timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// The host operations the full drill's devices run too (internal/rodevice).
var (
	run             = hostexec.Run
	loopBackingFile = hostexec.LoopBackingFile
	unmountFuse     = hostexec.UnmountFuse
)
