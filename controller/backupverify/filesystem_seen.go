package backupverify

import (
	"time"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/fscheck"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// filesystemSeen is what tells a full drill that a volume held a
// filesystem: an earlier full drill of one of its backups that found one.
type filesystemSeen struct {
	filesystem string
	backup     string
	at         time.Time
}

// filesystemSeen is the latest full drill of b's volume's backups, in any
// target, that found a filesystem; nil when none did (or the backups
// cannot be listed: the volume is then taken for a raw one, as before).
func (c *Controller) filesystemSeen(b *longhorn.Backup) *filesystemSeen {
	volume := datastore.BackupVolumeName(b)
	backups, err := c.ds.ListBackupsRO(volume)
	if err != nil {
		c.Logger.WithError(err).WithField("volume", volume).Warn("Cannot list the volume's backups to learn whether it held a filesystem")
		return nil
	}
	v, err := c.ds.GetVolumeRO(volume)
	if err != nil {
		v = nil // a volume no longer in the cluster: its backups say
	}
	return lastFilesystemSeen(v, backups)
}

// lastFilesystemSeen is the latest drill, of backups' (each Backup's
// status.verification) and the volume's record (v may be nil), that found
// a filesystem the drill knows; nil when none did.
func lastFilesystemSeen(v *longhorn.Volume, backups []*longhorn.Backup) *filesystemSeen {
	var seen *filesystemSeen
	consider := func(backup string, rec *longhorn.BackupVerification) {
		if rec == nil || rec.Full == nil || (rec.Full.Filesystem != fscheck.Ext4 && rec.Full.Filesystem != fscheck.XFS) {
			return
		}
		if seen == nil || rec.VerifiedAt.After(seen.at) {
			seen = &filesystemSeen{filesystem: rec.Full.Filesystem, backup: backup, at: rec.VerifiedAt.Time}
		}
	}
	for _, b := range backups {
		consider(b.Name, b.Status.Verification)
	}
	if v != nil && v.Status.LastBackupVerification != nil {
		consider(v.Status.LastBackupVerification.Backup, v.Status.LastBackupVerification)
	}
	return seen
}
