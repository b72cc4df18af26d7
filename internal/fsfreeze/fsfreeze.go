// Package fsfreeze freezes the filesystem a pod mounts from a volume for
// the instant of a snapshot, as Longhorn's freeze-filesystem-for-snapshot
// does: FIFREEZE (what `fsfreeze -f` calls) flushes the filesystem's dirty
// data and journal to the device and holds new writes, the snapshot is
// taken, and FITHAW lets them go. A snapshot taken so is
// filesystem-consistent: mounted, it needs no journal replay.
//
// The filesystem is found as fstrim finds it (the CSI Node service's
// stage of the volume on this node, in the host's mount table). A thaw
// follows every freeze this package made, whatever the snapshot does,
// and at the latest after Bound: writers are never held longer.
package fsfreeze

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
)

// The ioctls of linux/fs.h: _IOWR('X', 119, int) and _IOWR('X', 120, int).
const (
	fiFreeze = 0xC0045877
	fiThaw   = 0xC0045878
)

// DefaultBound is how long a filesystem stays frozen at most.
const DefaultBound = 30 * time.Second

// Freezer freezes volumes' filesystems on this node.
type Freezer struct {
	// Locate finds the filesystem (its StateDir and HostProc).
	Locate fstrim.Trimmer
	// Bound is how long a filesystem is held frozen at most
	// (DefaultBound when 0).
	Bound time.Duration
	// Log, when set, is where freezes and thaws are said.
	Log *logrus.Entry
}

// ErrFreeze marks a filesystem that could not be frozen: the snapshot is
// not taken.
var ErrFreeze = errors.New("the volume's filesystem could not be frozen")

// Around runs snapshot with volume's mounted filesystem frozen, and
// thaws it once snapshot returns or Bound has passed. A volume with no
// filesystem mounted on this node (not staged here, a raw block device)
// has nothing to freeze: snapshot runs as it is. A filesystem another
// froze is left frozen, and not thawed here.
func (f Freezer) Around(ctx context.Context, volume string, snapshot func() error) error {
	mp, err := f.Locate.MountPoint(volume)
	if errors.Is(err, fstrim.ErrNoFilesystem) {
		return snapshot()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFreeze, err)
	}
	log := f.log().WithFields(logrus.Fields{"volume": volume, "mountPoint": mp})
	// One freeze at a time per filesystem: a second would find it frozen
	// and the first thaw it under the second's snapshot.
	lock := mountLock(mp)
	lock.Lock()
	defer lock.Unlock()
	path := mp
	if f.Locate.HostProc != "" {
		// The host's mount namespace, through its init's root.
		path = filepath.Join(f.Locate.HostProc, "1/root", mp)
	}
	dir, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: open %s: %v", ErrFreeze, mp, err)
	}
	defer dir.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	switch err := ioctl(dir, fiFreeze); {
	case errors.Is(err, unix.EBUSY):
		// Frozen already, by someone else (an fsfreeze of the user's):
		// consistent, and theirs to thaw.
		log.Info("The volume's filesystem is frozen already; the snapshot is taken, and it is left frozen")
		return snapshot()
	case err != nil:
		return fmt.Errorf("%w: FIFREEZE %s: %v", ErrFreeze, mp, err)
	}
	thawed := make(chan struct{})
	done := make(chan struct{})
	bound := f.Bound
	if bound <= 0 {
		bound = DefaultBound
	}
	go func() {
		defer close(thawed)
		select {
		case <-done:
		case <-time.After(bound):
			log.WithField("bound", bound).Warn("The snapshot takes longer than a filesystem may stay frozen: thawing it now; this snapshot may not be filesystem-consistent")
		}
		thaw(dir, log)
	}()
	err = snapshot()
	close(done)
	<-thawed
	log.WithField("frozenFor", time.Since(start).Round(time.Millisecond)).Info("Froze the volume's filesystem for its snapshot, and thawed it")
	return err
}

// mountLocks are the locks of the filesystems frozen here, by mount
// point.
var mountLocks sync.Map

func mountLock(mp string) *sync.Mutex {
	l, _ := mountLocks.LoadOrStore(mp, &sync.Mutex{})
	return l.(*sync.Mutex)
}

// thaw thaws the filesystem of dir, trying again a few times: a writer
// held by a freeze left in place waits forever.
func thaw(dir *os.File, log *logrus.Entry) {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = ioctl(dir, fiThaw)
		if err == nil || errors.Is(err, unix.EINVAL) {
			// EINVAL: not frozen (any more).
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	log.WithError(err).Error("Cannot thaw the volume's filesystem: its writers wait until `fsfreeze -u` is run on it")
}

func ioctl(f *os.File, req uintptr) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func (f Freezer) log() *logrus.Entry {
	if f.Log != nil {
		return f.Log
	}
	return logrus.WithField("component", "fsfreeze")
}

// Guard is a Freezer applied to the volumes whose policy asks for it.
type Guard struct {
	Freezer Freezer
	// Enabled says whether volume's snapshots freeze its filesystem (the
	// volume's freezeFilesystemForSnapshot, or the setting). An error
	// fails the snapshot: its policy is not known.
	Enabled func(volume string) (bool, error)
}

// Around runs snapshot, with volume's filesystem frozen when its policy
// says so.
func (g Guard) Around(ctx context.Context, volume string, snapshot func() error) error {
	if g.Enabled == nil {
		return snapshot()
	}
	on, err := g.Enabled(volume)
	if err != nil {
		return fmt.Errorf("whether volume %s's snapshots freeze its filesystem: %w", volume, err)
	}
	if !on {
		return snapshot()
	}
	return g.Freezer.Around(ctx, volume, snapshot)
}
