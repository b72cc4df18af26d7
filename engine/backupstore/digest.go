package backupstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
)

// A backup records the digest of the snapshot as it backed it up
// (BackupInfo.SnapshotDigest): a SHA-256 over the volume's size and, in
// order of offset, each stored block's offset and SHA-256. What lies
// between stored blocks reads as zeros (or as the backing image, for a
// volume on one), so the gaps are the zero ranges and the digest names
// the whole snapshot. A block's SHA-256 is taken from its data as the
// backup read it (or, for a block an incremental backup took from the
// previous one, as that backup read it), so a drill that finds every
// block hashing to its name and the config's list giving this digest has
// checked, end to end, that the blocks the config lists make up exactly
// what was backed up: a block entry dropped, moved or changed in the
// config, which each entry's own rules cannot tell, changes the digest.

// digestPrefix starts every digest, naming its version.
const digestPrefix = "sha256:"

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// snapshotDigest is the digest of a snapshot of size bytes stored as
// blocks (in increasing order of offset).
func snapshotDigest(size int64, blocks []BlockRef) string {
	h := sha256.New()
	buf := make([]byte, 0, 128)
	buf = append(buf, "longhorn-backup-digest-v1 size "...)
	buf = strconv.AppendInt(buf, size, 10)
	buf = append(buf, '\n')
	h.Write(buf)
	for _, ref := range blocks {
		buf = strconv.AppendInt(buf[:0], ref.Offset, 10)
		buf = append(buf, ' ')
		buf = append(buf, ref.Checksum...)
		buf = append(buf, '\n')
		h.Write(buf)
	}
	return digestPrefix + hex.EncodeToString(h.Sum(nil))
}

// checkDigest compares a backup's recorded digest with its block list:
// nil when they agree or when the backup records none (older backups;
// DigestAbsent says so).
func (b *BackupInfo) checkDigest() error {
	if b.SnapshotDigest == "" {
		return nil
	}
	if got := snapshotDigest(b.VolumeSize, b.Blocks); got != b.SnapshotDigest {
		return fmt.Errorf("backup %s of volume %s: its block list gives the digest %s, not the %s recorded when it was made: the list does not describe what was backed up",
			b.Name, b.VolumeName, got, b.SnapshotDigest)
	}
	return nil
}
