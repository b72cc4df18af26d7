// Package fscheck finds the filesystem a block device holds by its
// superblock and runs that filesystem's own read-only check on it:
// e2fsck -n -f for ext2/3/4, xfs_repair -n for xfs. Neither writes the
// device (and a backup drill gives them a read-only one besides).
package fscheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Filesystems Detect knows.
const (
	Ext4 = "ext4" // ext2, ext3 and ext4: one superblock, one checker
	XFS  = "xfs"
	None = "none"
)

// HeadSize is how much of a device's start Detect reads.
const HeadSize = 4096

// Detect names the filesystem whose superblock starts head (the device's
// first HeadSize bytes): an ext superblock at 1024 holds 0xEF53 at its
// byte 56; an xfs one starts the device with "XFSB".
func Detect(head []byte) string {
	switch {
	case len(head) >= 4 && bytes.Equal(head[:4], []byte("XFSB")):
		return XFS
	case len(head) >= 1024+58 && binary.LittleEndian.Uint16(head[1024+56:]) == 0xEF53:
		return Ext4
	}
	return None
}

// Result is what a check found.
type Result struct {
	// Check is longhorn.FilesystemCheckPassed, Failed or Error.
	Check string
	// Output is the command, its exit status and the end of its output.
	Output string
}

// Check runs fs's read-only check on device.
func Check(ctx context.Context, fs, device string) Result {
	var args []string
	switch fs {
	case Ext4:
		args = []string{"e2fsck", "-n", "-f", device}
	case XFS:
		args = []string{"xfs_repair", "-n", device}
	default:
		return Result{Check: longhorn.FilesystemCheckSkipped}
	}
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return Result{Check: longhorn.FilesystemCheckError, Output: fmt.Sprintf("%s: %v", strings.Join(args, " "), err)}
	}
	if ctx.Err() != nil {
		return Result{Check: longhorn.FilesystemCheckError, Output: fmt.Sprintf("%s: %v", strings.Join(args, " "), ctx.Err())}
	}
	return Result{Check: Classify(fs, code), Output: Summarise(strings.Join(args, " "), code, out)}
}

// Classify reads a checker's exit status. e2fsck's is a bit mask: 0
// clean; 4 errors left uncorrected (with -n it corrects none), 1 or 2
// errors corrected (so found): the filesystem is damaged, whatever else
// is set (a root inode cleared gives 12, found and then aborted); 8
// (operational error), 16, 32 or 128 alone, it could not check.
// xfs_repair -n: 0 clean, 1 corruption found, anything else it could not
// check.
func Classify(fs string, code int) string {
	switch fs {
	case Ext4:
		switch {
		case code == 0:
			return longhorn.FilesystemCheckPassed
		case code&(1|2|4) != 0:
			return longhorn.FilesystemCheckFailed
		}
		return longhorn.FilesystemCheckError
	case XFS:
		switch code {
		case 0:
			return longhorn.FilesystemCheckPassed
		case 1:
			return longhorn.FilesystemCheckFailed
		}
		return longhorn.FilesystemCheckError
	}
	return longhorn.FilesystemCheckSkipped
}

// summaryLines and summaryBytes bound what a status keeps of a check's
// output: its last lines, where both checkers say what they found.
const (
	summaryLines = 12
	summaryBytes = 1024
)

// Summarise is the command, its exit status and the end of its output.
func Summarise(command string, code int, out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) > summaryLines {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-summaryLines)}, lines[len(lines)-summaryLines:]...)
	}
	tail := strings.Join(lines, "\n")
	if len(tail) > summaryBytes {
		tail = "..." + tail[len(tail)-summaryBytes:]
	}
	return fmt.Sprintf("%s: exit %d\n%s", command, code, tail)
}
