package device

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// Release undoes what r records of a device, whatever part of it was made
// or is still there: it detaches the loop device, flushing it, unmounts
// the FUSE file and ends nbdfuse, then removes the files nbdfuse left. A
// loop device still held open (a filesystem mounted on it) is ErrInUse
// and nothing is undone, unless dead: the device no longer stands (its
// nbdfuse died or lost its export), no write can reach the engine any
// more, and what is left is undone all the same (the loop device goes
// once its last user closes it, the FUSE mount is detached lazily).
//
// r must come from Sanitize (or a Manager's own making): its paths are
// those of its volume's folder.
func Release(r *Record, dead bool, log *logrus.Entry) error {
	// The loop device recorded, and any other reading the file (made by a
	// process that died before it recorded it).
	loops := loopsReading(r.FuseFile)
	if r.Device != "" && r.FuseFile != "" && loopBackingFile(r.Device) == r.FuseFile && !slices.Contains(loops, r.Device) {
		loops = append(loops, r.Device)
	}
	if !dead {
		for _, dev := range loops {
			if heldOpen(dev) {
				return fmt.Errorf("%w: volume %s's device %s is held open (mounted): unmount it first", ErrInUse, r.VolumeID, dev)
			}
		}
	}
	for _, dev := range loops {
		syncFile(dev)
		if _, err := run(context.Background(), "losetup", "-d", dev); err != nil {
			return err
		}
		if dead {
			log.WithField("device", dev).Info("Detached the loop device of a device that no longer stands (it goes once its last user closes it)")
			continue
		}
		// The kernel lets a loop device go once its last user closes it.
		if err := waitFor(10*time.Second, func() bool { return loopBackingFile(dev) != r.FuseFile }); err != nil {
			return fmt.Errorf("%w: loop device %s still reads %s: something holds it open", ErrInUse, dev, r.FuseFile)
		}
		log.WithField("device", dev).Info("Detached the loop device")
	}
	if r.FuseDir != "" && isMountPoint(r.FuseDir) {
		if dead {
			_ = unix.Unmount(r.FuseDir, unix.MNT_DETACH)
		} else {
			// Writes nbdfuse holds reach the engine before it stops.
			syncFile(r.FuseFile)
			if err := unmountFuse(r.FuseDir); err != nil {
				return err
			}
		}
		log.WithField("fuseDir", r.FuseDir).Info("Unmounted the volume's nbdfuse")
	}
	// nbdfuse ends once unmounted; one that does not is stopped. Found by
	// its command line, the recorded pid or not (one started by a process
	// that died before it recorded it).
	for _, pid := range nbdfusesServing(r.FuseFile) {
		serving := func() bool { return slices.Contains(nbdfusesServing(r.FuseFile), pid) }
		if err := waitFor(10*time.Second, func() bool { return !serving() }); err != nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			if err := waitFor(5*time.Second, func() bool { return !serving() }); err != nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			log.WithField("pid", pid).Info("Stopped the volume's nbdfuse, which did not end once unmounted")
		}
	}
	if isMountPoint(r.FuseDir) {
		_ = unix.Unmount(r.FuseDir, unix.MNT_DETACH)
	}
	if r.FuseDir != "" {
		for _, p := range []string{r.FuseDir, r.FuseDir + ".pid", r.FuseDir + ".log"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.WithError(err).WithField("path", p).Warn("Could not remove what nbdfuse left")
			}
		}
	}
	return nil
}

// loopsReading lists the loop devices whose backing file is file.
func loopsReading(file string) []string {
	if file == "" {
		return nil
	}
	entries, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []string
	for _, e := range entries {
		data, err := os.ReadFile(e)
		if err == nil && strings.TrimSpace(string(data)) == file {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(e))))
		}
	}
	return out
}

// nbdfusesServing lists the live nbdfuse processes that serve file (one
// of their arguments).
func nbdfusesServing(file string) []int {
	if file == "" {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 {
			continue
		}
		if isOurNbdfuse(&Record{NbdfusePID: pid, FuseFile: file}) {
			out = append(out, pid)
		}
	}
	return out
}

// heldOpen says whether a block device is held exclusively: a mounted
// filesystem holds its device so, in whichever mount namespace it is
// mounted.
func heldOpen(device string) bool {
	fd, err := unix.Open(device, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Is(err, unix.EBUSY)
	}
	unix.Close(fd)
	return false
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
