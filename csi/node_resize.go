package csi

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// growSlack is how much larger than its filesystem a device must be for
// the filesystem to be grown: less is the rounding of the filesystem's
// blocks and groups, not a volume that grew.
const growSlack = 1 << 20

// growFilesystem grows the filesystem mounted at st's staging path to its
// device's size, online.
func growFilesystem(ctx context.Context, st *stagedVolume, log *logrus.Entry) error {
	devSize, err := loopSize(st.Device)
	if err != nil {
		return status.Errorf(codes.Internal, "volume %s's device %s: %v", st.VolumeID, st.Device, err)
	}
	fsSize, err := filesystemSize(ctx, st.Device, st.FsType)
	if err != nil {
		return status.Errorf(codes.Internal, "volume %s: %v", st.VolumeID, err)
	}
	if devSize-fsSize < growSlack {
		return nil
	}
	log = log.WithFields(logrus.Fields{"device": st.Device, "fsType": st.FsType, "from": fsSize, "to": devSize})
	switch st.FsType {
	case "ext4":
		if _, err := run(ctx, "resize2fs", st.Device); err != nil {
			if strings.Contains(err.Error(), "Permission denied") {
				return status.Errorf(codes.FailedPrecondition, "volume %s: its device grew to %d bytes, but the kernel refused to grow its mounted ext4 filesystem (%d bytes) online: "+
					"that needs CAP_SYS_RESOURCE, which this node plugin lacks; the filesystem grows when the volume is next staged (%v)", st.VolumeID, devSize, fsSize, err)
			}
			return status.Errorf(codes.Internal, "volume %s: grow its ext4 filesystem: %v", st.VolumeID, err)
		}
	case "xfs":
		if _, err := run(ctx, "xfs_growfs", st.StagingPath); err != nil {
			return status.Errorf(codes.Internal, "volume %s: grow its xfs filesystem at %s: %v", st.VolumeID, st.StagingPath, err)
		}
	default:
		return status.Errorf(codes.Internal, "volume %s: cannot grow a %q filesystem", st.VolumeID, st.FsType)
	}
	log.Info("Grew the volume's filesystem online")
	return nil
}

// growFilesystemOffline grows an ext4 filesystem that is not mounted to
// its device's size, as NodeStageVolume does before it mounts a volume
// that grew (while detached, or while staged on a node that could not
// grow it online). The filesystem is checked first (e2fsck -f -p, which
// resize2fs asks for, and which fixes only what is safe to fix); one the
// check finds broken is left as it is, and mounted at its old size.
func growFilesystemOffline(ctx context.Context, device, fsType string, log *logrus.Entry) {
	if fsType != "ext4" {
		return
	}
	devSize, err := loopSize(device)
	if err != nil {
		log.WithError(err).Warn("Could not read the device's size: the filesystem is not grown")
		return
	}
	fsSize, err := filesystemSize(ctx, device, fsType)
	if err != nil || devSize-fsSize < growSlack {
		return
	}
	log = log.WithFields(logrus.Fields{"device": device, "fsType": fsType, "from": fsSize, "to": devSize})
	if _, err := run(ctx, "e2fsck", "-f", "-p", device); err != nil && exitCode(err) > 1 {
		log.WithError(err).Warn("The filesystem's check before growing it found problems it did not fix: it is not grown, and is mounted at its old size")
		return
	}
	if _, err := run(ctx, "resize2fs", device); err != nil {
		log.WithError(err).Warn("Could not grow the filesystem: it is mounted at its old size")
		return
	}
	log.Info("Grew the volume's filesystem before mounting it: the volume grew since it was last staged")
}

var (
	ext4BlockCount = regexp.MustCompile(`(?m)^Block count:\s+(\d+)`)
	ext4BlockSize  = regexp.MustCompile(`(?m)^Block size:\s+(\d+)`)
	xfsDataBlocks  = regexp.MustCompile(`(?m)^data\s+=\s+bsize=(\d+)\s+blocks=(\d+)`)
)

// filesystemSize is the size in bytes of the filesystem on device, as its
// superblock says.
func filesystemSize(ctx context.Context, device, fsType string) (int64, error) {
	switch fsType {
	case "ext4":
		out, err := run(ctx, "dumpe2fs", "-h", device)
		if err != nil {
			return 0, err
		}
		count, size := ext4BlockCount.FindStringSubmatch(out), ext4BlockSize.FindStringSubmatch(out)
		if count == nil || size == nil {
			return 0, fmt.Errorf("dumpe2fs -h %s: no block count and size", device)
		}
		return product(count[1], size[1])
	case "xfs":
		out, err := run(ctx, "xfs_info", device)
		if err != nil {
			return 0, err
		}
		m := xfsDataBlocks.FindStringSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("xfs_info %s: no data block size and count", device)
		}
		return product(m[1], m[2])
	}
	return 0, fmt.Errorf("no size for a %q filesystem", fsType)
}

func product(a, b string) (int64, error) {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || x < 0 || y < 0 || (y != 0 && x > (1<<62)/y) {
		return 0, fmt.Errorf("%q times %q is not a size", a, b)
	}
	return x * y, nil
}

// exitCode is the exit status run's error carries, -1 when none.
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	return -1
}

// sameDevice says whether path is a device node of the same device as
// device (a block volume published as a bind of its device).
func sameDevice(path, device string) bool {
	var a, b unix.Stat_t
	if unix.Stat(path, &a) != nil || unix.Stat(device, &b) != nil {
		return false
	}
	return a.Mode&unix.S_IFMT == unix.S_IFBLK && a.Rdev == b.Rdev
}
