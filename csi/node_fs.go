package csi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
)

// defaultFsType is the filesystem a mount capability without fs_type gets.
const defaultFsType = "ext4"

// supportedFsTypes are the filesystems NodeStageVolume makes, with the
// command that makes each. Neither discards the device's blocks: the data
// plane handles no unmap.
var supportedFsTypes = map[string][]string{
	"ext4": {"mkfs.ext4", "-q", "-E", "nodiscard"},
	"xfs":  {"mkfs.xfs", "-q", "-K"},
}

// probe is what a device holds, as blkid and its first and last bytes say.
type probe struct {
	// FsType, Usage and PartTable are blkid's TYPE, USAGE and PTTYPE.
	FsType, Usage, PartTable string
	// Ambiguous says blkid found signatures of several kinds.
	Ambiguous bool
	// Zero says the bytes read at the device's start and end are all zero.
	Zero bool
	// Written is how many bytes of data the volume holds, as its snapshots
	// and head say (the manager's API); BackingImage the image under it.
	Written      int64
	BackingImage string
}

// zeroCheckBytes are how many bytes at each end of a device that blkid
// finds nothing on must be zero for it to be formatted: where partition
// tables, superblocks and their backups live.
const zeroCheckBytes = 1 << 20

// probeDevice runs `blkid -p` on device (a file works too) and, when it
// finds nothing, reads the device's ends.
func probeDevice(ctx context.Context, device string) (probe, error) {
	var p probe
	cmd := exec.CommandContext(ctx, "blkid", "-p", "-o", "export", device)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		// Nothing blkid knows: the bytes decide.
		zero, err := endsAreZero(device)
		if err != nil {
			return p, err
		}
		p.Zero = zero
		return p, nil
	case errors.As(err, &exit) && exit.ExitCode() == 8:
		p.Ambiguous = true
		return p, nil
	default:
		return p, fmt.Errorf("blkid -p %s: %w: %s", device, err, strings.TrimSpace(stderr.String()))
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "TYPE":
			p.FsType = v
		case "USAGE":
			p.Usage = v
		case "PTTYPE":
			p.PartTable = v
		}
	}
	return p, nil
}

// endsAreZero says whether the first and last zeroCheckBytes of a device
// are zero.
func endsAreZero(device string) (bool, error) {
	f, err := os.Open(device)
	if err != nil {
		return false, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	buf := make([]byte, min(size, zeroCheckBytes))
	for _, off := range []int64{0, size - int64(len(buf))} {
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("read %s: %w", device, err)
		}
		for _, b := range buf {
			if b != 0 {
				return false, nil
			}
		}
	}
	return true, nil
}

// errDeviceInUse is why a device is neither formatted nor mounted: it
// holds something else than the filesystem asked for.
var errDeviceInUse = errors.New("the device holds data")

// needsFormat decides from a probe whether a device gets the filesystem
// want: yes only when it holds nothing at all (blkid finds nothing, no
// byte of the volume was ever written, it has no backing image, and its
// ends read as zeros); no when it already has
// that filesystem (which is then mounted); an error wrapping
// errDeviceInUse when it holds anything else, a filesystem of another
// type included: data is never formatted over.
func needsFormat(p probe, want string) (bool, error) {
	switch {
	case p.Ambiguous:
		return false, fmt.Errorf("%w: blkid finds several signatures on it; it is neither formatted nor mounted", errDeviceInUse)
	case p.PartTable != "":
		return false, fmt.Errorf("%w: it has a partition table (%s), not a filesystem; it is neither formatted nor mounted", errDeviceInUse, p.PartTable)
	case p.FsType == want:
		return false, nil
	case p.FsType != "" && p.Usage != "" && p.Usage != "filesystem":
		return false, fmt.Errorf("%w: it holds %s (%s), not a filesystem; it is not formatted", errDeviceInUse, p.FsType, p.Usage)
	case p.FsType != "":
		return false, fmt.Errorf("%w: it has a %s filesystem and the capability asks for %s; it is not reformatted", errDeviceInUse, p.FsType, want)
	case p.BackingImage != "":
		return false, fmt.Errorf("%w: blkid recognises no filesystem on it, and it reads backing image %s; it is not formatted", errDeviceInUse, p.BackingImage)
	case p.Written > 0:
		return false, fmt.Errorf("%w: blkid recognises no filesystem on it, but %d bytes of it have been written; it is not formatted", errDeviceInUse, p.Written)
	case !p.Zero:
		return false, fmt.Errorf("%w: blkid recognises no filesystem on it, but it is not blank (its first or last MiB is not zero); it is not formatted", errDeviceInUse)
	}
	return true, nil
}

// makeFilesystem formats device with fsType.
func makeFilesystem(ctx context.Context, device, fsType string, extra []string) error {
	argv, ok := supportedFsTypes[fsType]
	if !ok {
		return fmt.Errorf("no way to make a %s filesystem", fsType)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return fmt.Errorf("%s is not installed on this node: %w", argv[0], err)
	}
	args := append(append(append([]string{}, argv[1:]...), extra...), device)
	_, err := run(ctx, argv[0], args...)
	return err
}

// maxMkfsParams bounds the words of a StorageClass's mkfsParams.
const maxMkfsParams = 32

// parseMkfsParams reads a StorageClass's mkfsParams (Longhorn's: words
// added to the mkfs command, "-I 256 -b 4096 -O ^metadata_csum"). They go
// to mkfs as its arguments, no shell between, before the device; a word
// may hold letters, digits and _ . , : = ^ + % @ - only: no path (no /),
// so no word can name another device or a file to read.
func parseMkfsParams(key, value string) ([]string, error) {
	words := strings.Fields(value)
	if len(words) > maxMkfsParams {
		return nil, fmt.Errorf("%s: at most %d words, got %d", key, maxMkfsParams, len(words))
	}
	for _, w := range words {
		if len(w) > 256 {
			return nil, fmt.Errorf("%s: a word of at most 256 characters, got %d", key, len(w))
		}
		for _, r := range w {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.,:=^+%@-", r)) {
				return nil, fmt.Errorf("%s: %q holds %q; a word may hold letters, digits and _ . , : = ^ + %% @ - only (no paths)", key, w, r)
			}
		}
	}
	return words, nil
}
