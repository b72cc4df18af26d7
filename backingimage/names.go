package backingimage

import (
	"fmt"
	"path/filepath"
	"regexp"
)

// The folders under a disk.
const (
	// FilesFolder holds a manager's files: <disk>/backing-images/<name>-<uuid>/.
	FilesFolder = "backing-images"
	// TempFolder holds what a data source prepares: <disk>/tmp/<name>-<uuid>/.
	TempFolder = "tmp"
	// DataFile is the image's bytes inside a file's folder.
	DataFile = "backing"
	// MetaFile records the file's name, UUID, size and checksum; it is
	// written last, so a folder without it holds no complete file.
	MetaFile = "backing.cfg"
)

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	uuidPattern     = regexp.MustCompile(`^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`)
	checksumPattern = regexp.MustCompile(`^[0-9a-f]{128}$`)
)

// ValidateName checks a backing image name: a Kubernetes object name, so
// it can never climb out of the disk's folder.
func ValidateName(name string) error {
	if len(name) == 0 || len(name) > 253 || !namePattern.MatchString(name) {
		return fmt.Errorf("name %q: must be a lower-case DNS subdomain (a-z, 0-9, '-', '.'), at most 253 characters", name)
	}
	return nil
}

// ValidateUUID checks a backing image UUID.
func ValidateUUID(uuid string) error {
	if len(uuid) == 0 || len(uuid) > 64 || !uuidPattern.MatchString(uuid) {
		return fmt.Errorf("uuid %q: must be 1 to 64 letters, digits and inner '-'", uuid)
	}
	return nil
}

// ValidateChecksum checks an expected checksum; empty means none.
func ValidateChecksum(sum string) error {
	if sum != "" && !checksumPattern.MatchString(sum) {
		return fmt.Errorf("checksum %q: must be a SHA512 in lower-case hex (128 characters)", sum)
	}
	return nil
}

// ValidateFile checks a name, UUID and expected checksum together.
func ValidateFile(name, uuid, checksum string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := ValidateUUID(uuid); err != nil {
		return err
	}
	if n := len(FolderName(name, uuid)); n > 255 {
		return fmt.Errorf("name %q and uuid %q: the folder <name>-<uuid> would be %d characters, at most 255 fit a file system", name, uuid, n)
	}
	return ValidateChecksum(checksum)
}

// FolderName is the folder of one backing image's file: <name>-<uuid>.
func FolderName(name, uuid string) string { return name + "-" + uuid }

// FileFolder is where a manager keeps a backing image's file on a disk.
func FileFolder(disk, name, uuid string) string {
	return filepath.Join(disk, FilesFolder, FolderName(name, uuid))
}

// TempFileFolder is where a data source prepares a backing image's first file.
func TempFileFolder(disk, name, uuid string) string {
	return filepath.Join(disk, TempFolder, FolderName(name, uuid))
}
