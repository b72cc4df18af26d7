package types

import (
	"crypto/sha256"
	"encoding/hex"
)

// DefaultBackupTargetName is the BackupTarget kept in step with the
// backup-target, backup-target-credential-secret and
// backupstore-poll-interval settings, as Longhorn's.
const DefaultBackupTargetName = "default"

// BackupVolumeObjectName is the name of the BackupVolume of volume in
// target ("" is default). In default it is the volume's name, as every
// BackupVolume was before there were several targets, so existing objects
// keep their names and no upgrade renames them; in any other target it is
// Longhorn's (v1.8) name, the volume's name and 8 hex digits of the
// SHA-256 of "<volume>-<target>". The manager finds objects by
// spec.backupTargetName and spec.volumeName, never by their name alone.
func BackupVolumeObjectName(volume, target string) string {
	return BackupVolumeObjectNames(volume, target)[0]
}

// BackupVolumeObjectNames are the names the BackupVolume of volume in
// target is made with, in the order they are tried: its
// BackupVolumeObjectName, then the volume's name and 16 hex digits of the
// SHA-256 of "<volume>-<target>" ("default" for default). The second is
// taken when an object of another volume or target has the first (a
// volume named as another's hashed name), so that both have one.
func BackupVolumeObjectNames(volume, target string) []string {
	if target == "" {
		target = DefaultBackupTargetName
	}
	digest := sha256.Sum256([]byte(volume + "-" + target))
	sum := hex.EncodeToString(digest[:])
	first := volume + "-" + sum[:8]
	if target == DefaultBackupTargetName {
		first = volume
	}
	return []string{first, volume + "-" + sum[:16]}
}
