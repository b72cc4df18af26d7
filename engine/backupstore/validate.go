package backupstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// Everything read from a backup target is untrusted: another manager, an
// older version, a user with write access to the bucket or a damaged disk
// may have written it. A config is checked field by field before any of
// it is used, and an error names the field and the rule.

// MaxVolumeSize bounds the volume size a backup may record (1 PiB).
const MaxVolumeSize = 1 << 50

// maxLabelBytes bounds a backup's labels, keys and values together.
const maxLabelBytes = 64 << 10

// ErrInvalid marks a config in the target that breaks a rule.
var ErrInvalid = errors.New("invalid")

var (
	// namePattern is what volume and backup names in keys may look like:
	// no slash, no leading dot, so a key never leaves its folder.
	namePattern     = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}$`)
	checksumPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	imageSumPattern = regexp.MustCompile(`^[0-9a-f]{0,128}$`)
)

func checkName(kind, name string) error {
	if !namePattern.MatchString(name) {
		return fmt.Errorf("%s name %q: %w: must be 1 to 253 letters, digits, '-', '_' or '.', starting with a letter or digit", kind, name, ErrInvalid)
	}
	return nil
}

func checkNames(volume, backup string) error {
	if err := checkName("volume", volume); err != nil {
		return err
	}
	return checkName("backup", backup)
}

// decodeBackup parses and checks a backup config read from the target
// under the volume and backup names it was read by.
func decodeBackup(data []byte, volume, backup string) (*BackupInfo, error) {
	var info BackupInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("backup %s of volume %s in the backup target is corrupt: %w JSON: %v", backup, volume, ErrInvalid, err)
	}
	if err := info.validate(volume, backup); err != nil {
		return nil, fmt.Errorf("backup %s of volume %s in the backup target: %w", backup, volume, err)
	}
	return &info, nil
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", field, ErrInvalid, fmt.Sprintf(format, args...))
}

// validate checks a backup config read as backup of volume.
func (b *BackupInfo) validate(volume, backup string) error {
	if b.Name != backup {
		return invalid("name", "%q differs from the file's name %q", b.Name, backup)
	}
	if b.VolumeName != volume {
		return invalid("volumeName", "%q differs from the volume %q it is stored under", b.VolumeName, volume)
	}
	if b.VolumeSize <= 0 || b.VolumeSize > MaxVolumeSize {
		return invalid("volumeSize", "%d must be between 1 byte and 1 PiB", b.VolumeSize)
	}
	if err := CheckCompression(b.Compression); err != nil {
		return invalid("compression", "%v", err)
	}
	if b.Size < 0 || b.Size > b.VolumeSize {
		return invalid("size", "%d must be between 0 and the volume size %d", b.Size, b.VolumeSize)
	}
	for _, f := range []struct{ name, value string }{{"createdAt", b.CreatedAt}, {"snapshotCreatedAt", b.SnapshotCreatedAt}} {
		if f.value != "" {
			if _, err := time.Parse(time.RFC3339Nano, f.value); err != nil {
				return invalid(f.name, "%q is not an RFC 3339 time", f.value)
			}
		}
	}
	if b.SnapshotDigest != "" && !digestPattern.MatchString(b.SnapshotDigest) {
		return invalid("snapshotDigest", "%q must be \"sha256:\" and 64 lowercase hex digits", b.SnapshotDigest)
	}
	if !imageSumPattern.MatchString(b.BackingImageChecksum) {
		return invalid("backingImageChecksum", "must be at most 128 lowercase hex digits")
	}
	n := 0
	for k, v := range b.Labels {
		n += len(k) + len(v)
	}
	if n > maxLabelBytes {
		return invalid("labels", "%d bytes, more than %d", n, maxLabelBytes)
	}
	next := int64(0) // the lowest offset the next block may have
	for i, ref := range b.Blocks {
		field := fmt.Sprintf("blocks[%d]", i)
		if !checksumPattern.MatchString(ref.Checksum) {
			return invalid(field+".checksum", "%q must be 64 lowercase hex digits (SHA-256)", ref.Checksum)
		}
		switch {
		case ref.Offset < 0 || ref.Offset%BlockSize != 0:
			return invalid(field+".offset", "%d must be a non-negative multiple of %d", ref.Offset, BlockSize)
		case ref.Offset >= b.VolumeSize:
			return invalid(field+".offset", "%d is past the volume's end %d", ref.Offset, b.VolumeSize)
		case ref.Offset < next:
			return invalid(field+".offset", "%d repeats or precedes an earlier block's (blocks are in increasing order)", ref.Offset)
		}
		next = ref.Offset + BlockSize
	}
	return nil
}

// decodeVolume parses and checks a volume config read from the target.
func decodeVolume(data []byte, volume string) (*VolumeInfo, error) {
	var v VolumeInfo
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("volume %s in the backup target is corrupt: %w JSON: %v", volume, ErrInvalid, err)
	}
	if err := v.validate(volume); err != nil {
		return nil, fmt.Errorf("volume %s in the backup target: %w", volume, err)
	}
	return &v, nil
}

func (v *VolumeInfo) validate(volume string) error {
	if v.Name != volume {
		return invalid("name", "%q differs from the folder's name %q", v.Name, volume)
	}
	if v.Size < 0 || v.Size > MaxVolumeSize {
		return invalid("size", "%d must be between 0 and 1 PiB", v.Size)
	}
	if v.LastBackupName != "" && !namePattern.MatchString(v.LastBackupName) {
		return invalid("lastBackupName", "%q is not a backup name", v.LastBackupName)
	}
	return nil
}
