package backupverify

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/fscheck"
	"github.com/cadence-storage/longhorn-manager/internal/rodevice"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A full drill, once the blocks passed: the backup restored into a
// scratch volume (the restore checks the digest end to end before it
// writes), the scratch volume attached to this node, a read-only block
// device made of its NBD export, the filesystem its superblock names
// checked read-only, and the scratch volume deleted, whatever happened.

// DefaultFullDrillTimeout bounds a full drill: the restore, the attach
// and the filesystem check.
const DefaultFullDrillTimeout = 30 * time.Minute

// pollInterval is how often a full drill looks at its scratch volume.
const pollInterval = 250 * time.Millisecond

// fullDrill restores the backup into a scratch volume and checks what it
// holds. It returns what it found, and the drill's result and message.
func (c *Controller) fullDrill(ctx context.Context, b *longhorn.Backup, log *logrus.Entry) (*longhorn.BackupFullDrill, string, string) {
	name := ScratchVolumeName(b.Name)
	full := &longhorn.BackupFullDrill{ScratchVolume: name}
	log = log.WithField("scratchVolume", name)
	ctx, cancel := context.WithTimeout(ctx, c.FullDrillTimeout)
	defer cancel()
	c.setActive(name)
	defer func() {
		// Whatever happened, and with a context of its own: a drill cut
		// short by the daemon's end still deletes what it made (and the
		// next start does, if this does not get to).
		c.deleteScratch(context.WithoutCancel(ctx), name, "the drill ended", log)
		c.setActive("")
	}()

	start := c.now()
	log.Info("Full drill: restoring the backup into a scratch volume")
	if err := c.createScratch(ctx, b, name); err != nil {
		return full, longhorn.BackupVerificationError, fmt.Sprintf("full drill: create scratch volume %s: %v", name, err)
	}
	restoreErr, err := c.waitRestored(ctx, name)
	full.RestoreSeconds = strconv.FormatFloat(c.now().Sub(start).Seconds(), 'f', 3, 64)
	if err != nil {
		return full, longhorn.BackupVerificationError, fmt.Sprintf("full drill: the restore into %s did not end: %v", name, err)
	}
	if restoreErr != "" {
		return full, longhorn.BackupVerificationFailed, "full drill: the backup did not restore: " + restoreErr
	}
	full.Restored = true
	log.WithField("restoreSeconds", full.RestoreSeconds).Info("Full drill: restored, the digest checked end to end; checking the filesystem")

	endpoint, err := c.attachScratch(ctx, name)
	if err != nil {
		return full, longhorn.BackupVerificationError, fmt.Sprintf("full drill: attach scratch volume %s: %v", name, err)
	}
	dev, err := rodevice.Open(ctx, c.ScratchDeviceRoot, name, endpoint)
	if err != nil {
		return full, longhorn.BackupVerificationError, fmt.Sprintf("full drill: a read-only device of %s: %v", name, err)
	}
	defer func() {
		if err := dev.Close(); err != nil {
			log.WithError(err).Warn("Full drill: could not undo the scratch volume's device; the next start sweeps it")
		}
	}()
	head := make([]byte, fscheck.HeadSize)
	if n, err := dev.ReadAt(head, 0); n < len(head) && err != nil {
		return full, longhorn.BackupVerificationError, fmt.Sprintf("full drill: read the start of %s: %v", name, err)
	}
	full.Filesystem = fscheck.Detect(head)
	res := fscheck.Check(ctx, full.Filesystem, dev.Path)
	full.FilesystemCheck, full.FilesystemCheckOutput = res.Check, res.Output
	if full.FilesystemCheck == longhorn.FilesystemCheckSkipped {
		lostFilesystem(full, c.filesystemSeen(b))
	}
	result, msg := fullDrillResult(full)
	return full, result, msg
}

// lostFilesystem marks the filesystem check Failed when the restored data
// holds no filesystem the drill knows but an earlier drill of the
// volume's backups found one (seen; nil when none did): its start is
// lost or overwritten, and a restore gives nothing to mount. With none
// seen the volume is taken for a raw block volume, the check Skipped.
func lostFilesystem(full *longhorn.BackupFullDrill, seen *filesystemSeen) {
	if full.FilesystemCheck != longhorn.FilesystemCheckSkipped || seen == nil {
		return
	}
	full.FilesystemCheck = longhorn.FilesystemCheckFailed
	full.FilesystemCheckOutput = fmt.Sprintf("no filesystem the drill knows (ext4, xfs) at the start of the restored data, though the drill of backup %s at %s found %s in the volume's",
		seen.backup, seen.at.UTC().Format(time.RFC3339), seen.filesystem)
}

// fullDrillResult is the drill's result once the backup restored: the
// filesystem check's verdict (a corrupt or lost filesystem is a damaged
// backup, though every block is whole: it is not what a restore needs).
func fullDrillResult(full *longhorn.BackupFullDrill) (string, string) {
	switch full.FilesystemCheck {
	case longhorn.FilesystemCheckPassed:
		return longhorn.BackupVerificationPassed, ""
	case longhorn.FilesystemCheckSkipped:
		return longhorn.BackupVerificationPassed, "full drill: the restored data holds no filesystem the drill knows (ext4, xfs), and no drill of the volume's backups found one: taken for a raw block volume, the restore alone is checked"
	case longhorn.FilesystemCheckFailed:
		if full.Filesystem == fscheck.None {
			return longhorn.BackupVerificationFailed, "full drill: the restored filesystem is lost: " + full.FilesystemCheckOutput
		}
		return longhorn.BackupVerificationFailed, fmt.Sprintf("full drill: the restored %s filesystem is corrupt: %s", full.Filesystem, full.FilesystemCheckOutput)
	}
	return longhorn.BackupVerificationError, fmt.Sprintf("full drill: the %s check could not be made: %s", full.Filesystem, full.FilesystemCheckOutput)
}

// waitRestored waits for the scratch volume's restore: it returns the
// restore's error as the volume reports it ("" once it restored), or
// ctx's error.
func (c *Controller) waitRestored(ctx context.Context, name string) (string, error) {
	for {
		v, err := c.ds.GetVolumeFresh(ctx, name)
		if err != nil {
			return "", err
		}
		if done, failed := restoreState(v); done {
			return failed, nil
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return "", err
		}
	}
}

// attachScratch attaches the scratch volume to this node (the NBD export
// on loopback) and returns its endpoint.
func (c *Controller) attachScratch(ctx context.Context, name string) (string, error) {
	if err := c.updateScratch(ctx, name, func(v *longhorn.Volume) { v.Spec.NodeID = c.nodeID }); err != nil {
		return "", err
	}
	for {
		v, err := c.ds.GetVolumeFresh(ctx, name)
		if err != nil {
			return "", err
		}
		if v.Status.State == longhorn.VolumeStateAttached {
			if e, err := c.ds.GetEngineRO(datastore.EngineName(name)); err == nil && e.Status.Endpoint != "" {
				return e.Status.Endpoint, nil
			}
		}
		if err := sleep(ctx, pollInterval); err != nil {
			return "", err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("timed out")
		}
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
