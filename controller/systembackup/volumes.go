package systembackup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// volumeBackup is what the archive records of one volume: the backup it
// is restored from, none when the policy made none and it had none.
type volumeBackup struct {
	name string
	at   string
}

// volumeStep is what a system backup does for one volume: restore it
// from an existing backup (use), make a backup (backup, full or not),
// or neither. why says why a backup is made, or made full.
type volumeStep struct {
	use    volumeBackup
	backup bool
	full   bool
	why    string
}

// decideVolume is the volume backup policy's decision for v, given the
// last backup the default target records of a volume of its name (nil
// for none) and whether the volume's next backup to that target must be
// full, and why (datastore.NextBackupFull: a drill found a backup of it
// there damaged). A drill's scratch volume is not the user's data: it is
// neither backed up nor archived. Under if-not-present the last backup
// is used only when it is this volume's own (ownBackup) and no drill
// found the volume's backups damaged since its last full one.
func decideVolume(p longhorn.SystemBackupCreateVolumeBackupPolicy, v *longhorn.Volume, last *backupstore.BackupInfo, full bool, fullWhy string) volumeStep {
	if datastore.IsDrillScratchVolume(v) {
		return volumeStep{}
	}
	switch p {
	case longhorn.SystemBackupCreateVolumeBackupPolicyAlways:
		return volumeStep{backup: true, full: full, why: firstOf(fullWhy, "volumeBackupPolicy always")}
	case longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent:
		if last == nil {
			return volumeStep{backup: true, full: full, why: firstOf(fullWhy, "the default backup target holds no backup of it")}
		}
		if why := ownBackup(v, last); why != "" {
			return volumeStep{backup: true, full: full, why: firstOf(fullWhy, why)}
		}
		if full {
			return volumeStep{backup: true, full: true, why: fullWhy}
		}
		return volumeStep{use: volumeBackup{name: last.Name, at: last.CreatedAt}}
	}
	return volumeStep{}
}

// ownBackup says why b is not a backup of this very volume taken since
// it was made, "" when it is. A backup of a volume of the same name
// counts only with the volume's UID (types.LabelVolumeUID; another
// cluster's on a shared target, or a volume's deleted and made again
// under the name, has another, and a backup made before the manager
// recorded it none), and only when its snapshot and the backup itself
// are not older than the volume: restoring the volume from it would
// give it another volume's data.
func ownBackup(v *longhorn.Volume, b *backupstore.BackupInfo) string {
	if uid := b.Labels[types.LabelVolumeUID]; uid == "" || uid != string(v.UID) {
		return fmt.Sprintf("its last backup %s in the default backup target is not known to be of this volume (label %s %q, the volume's UID %q)", b.Name, types.LabelVolumeUID, uid, v.UID)
	}
	created := v.CreationTimestamp.Time
	for _, at := range []struct{ what, when string }{{"snapshot made", b.SnapshotCreatedAt}, {"backup made", b.CreatedAt}} {
		t, err := time.Parse(time.RFC3339Nano, at.when)
		if err != nil || t.Before(created) {
			return fmt.Sprintf("its last backup %s in the default backup target is of a %s at %q, not after the volume was created at %s", b.Name, at.what, at.when, created.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// lastBackup is the last backup the default target records of a volume
// of the name, nil when it records none, or names one that is gone or
// whose record cannot be read (a backup is made then). A volume record
// that cannot be read is an error: the system backup fails naming it.
func lastBackup(t target, volume string) (*backupstore.BackupInfo, error) {
	info, err := t.store.Volume(volume)
	if errors.Is(err, backupstore.ErrNotExist) || (err == nil && info.LastBackupName == "") {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := t.store.Get(volume, info.LastBackupName)
	if errors.Is(err, backupstore.ErrNotExist) || errors.Is(err, backupstore.ErrInvalid) {
		return nil, nil
	}
	return b, err
}

// backupVolumes makes the volume backups the policy asks for, in the
// default target, and returns the backup each volume is to be restored
// from. A volume that needs a backup and cannot have one (detached,
// faulted) is an error naming it: an archive without it would restore
// an empty volume.
func (c *BackupController) backupVolumes(ctx context.Context, sb *longhorn.SystemBackup, t target) (map[string]volumeBackup, error) {
	policy, err := systembackup.ParsePolicy(string(sb.Spec.VolumeBackupPolicy))
	if err != nil {
		return nil, err
	}
	vols, err := c.ds.ListVolumesRO(labels.Everything())
	if err != nil {
		return nil, err
	}
	sort.Slice(vols, func(i, j int) bool { return vols[i].Name < vols[j].Name })
	out := map[string]volumeBackup{}
	var errs []error
	for _, v := range vols {
		if policy == longhorn.SystemBackupCreateVolumeBackupPolicyDisabled {
			continue
		}
		last, err := lastBackup(t, v.Name)
		if err != nil {
			return nil, fmt.Errorf("volume %s: read its last backup in the target: %w", v.Name, err)
		}
		backups, err := c.ds.ListBackupsRO(v.Name)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		// The same decision as every other backup's of the volume.
		full, fullWhy := datastore.NextBackupFull(v, backups, datastore.DefaultBackupTargetName)
		step := decideVolume(policy, v, last, full, fullWhy)
		if !step.backup {
			if step.use.name != "" {
				out[v.Name] = step.use
			}
			continue
		}
		c.Logger.WithFields(logrus.Fields{"systemBackup": sb.Name, "volume": v.Name, "full": step.full, "reason": step.why}).Info("Backing up the volume for the system backup")
		made, err := c.backupVolume(ctx, sb, v, t, step.full)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			continue
		}
		out[v.Name] = made
	}
	return out, errors.Join(errs...)
}

// backupVolume takes a snapshot of an attached volume and backs it up to
// the default target (full when asked), waiting for the backup.
func (c *BackupController) backupVolume(ctx context.Context, sb *longhorn.SystemBackup, v *longhorn.Volume, t target, full bool) (volumeBackup, error) {
	log := c.Logger.WithFields(logrus.Fields{"systemBackup": sb.Name, "volume": v.Name})
	if v.Spec.NodeID == "" && v.Status.State == longhorn.VolumeStateDetached {
		// As Longhorn does, a detached volume is attached for its backup
		// and detached after it.
		if err := c.attachForBackup(ctx, sb.Name, v, log); err != nil && !errors.Is(err, errTakenOver) {
			c.detachAfterBackup(context.WithoutCancel(ctx), sb.Name, v.Name, log)
			return volumeBackup{}, fmt.Errorf("attach it for its backup: %w", err)
		}
		defer c.detachAfterBackup(context.WithoutCancel(ctx), sb.Name, v.Name, log)
		if cur, err := c.ds.GetVolumeRO(v.Name); err == nil {
			v = cur
		}
	}
	e, err := c.ds.GetEngineRO(datastore.EngineName(v.Name))
	if err != nil || v.Status.State != longhorn.VolumeStateAttached || e.Status.CurrentState != longhorn.InstanceStateRunning || e.Status.Port == 0 {
		return volumeBackup{}, fmt.Errorf("needs a backup (volumeBackupPolicy %q) and is not attached (state %q): attach it, or back it up first", sb.Spec.VolumeBackupPolicy, v.Status.State)
	}
	client, err := engineapi.NewGRPCClient(net.JoinHostPort(e.Status.IP, strconv.Itoa(e.Status.Port)), v.Name, 0, c.internalTLS)
	if err != nil {
		return volumeBackup{}, err
	}
	defer client.Close()
	labels := map[string]string{types.LabelSystemBackup: sb.Name}
	snap, err := client.SnapshotCreate(ctx, "", labels)
	if err != nil {
		return volumeBackup{}, err
	}
	compression, err := c.ds.GetSettingValue(types.SettingNameBackupCompressionMethod)
	if err != nil {
		return volumeBackup{}, err
	}
	concurrency, err := c.ds.GetSettingAsInt(types.SettingNameBackupConcurrentLimit)
	if err != nil {
		return volumeBackup{}, err
	}
	backupLabels := map[string]string{types.LabelSystemBackup: sb.Name, types.LabelVolumeUID: string(v.UID)}
	name, err := client.SnapshotBackup(ctx, engineapi.BackupRequest{Name: backupstore.NewBackupName(), Snapshot: snap, Target: t.URL,
		Credential: t.cred, Labels: backupLabels, Compression: compression, Concurrency: concurrency, Full: full})
	if err != nil {
		return volumeBackup{}, err
	}
	for {
		st, err := client.BackupStatus(ctx)
		if err != nil {
			return volumeBackup{}, err
		}
		if s := st[name]; s != nil {
			switch s.State {
			case string(longhorn.BackupStateCompleted):
				c.waitMirrored(ctx, v.Name, name, log)
				return volumeBackup{name: name, at: time.Now().UTC().Format(time.RFC3339)}, nil
			case string(longhorn.BackupStateError):
				return volumeBackup{}, fmt.Errorf("backup %s: %s", name, s.Error)
			}
		}
		select {
		case <-ctx.Done():
			return volumeBackup{}, context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}

// mirrorWait bounds the wait for the Engine object to show a finished
// backup.
const mirrorWait = 30 * time.Second

// waitMirrored waits until the volume's Engine object shows the backup
// finished: that change is what makes the backup target controller read
// the volume's backups (its Backup object), and a volume the system
// backup attached is detached right after, its engine gone before its
// mirror would say so.
func (c *BackupController) waitMirrored(ctx context.Context, volume, backup string, log *logrus.Entry) {
	deadline := time.Now().Add(mirrorWait)
	for time.Now().Before(deadline) {
		e, err := c.ds.GetEngineRO(datastore.EngineName(volume))
		if err == nil {
			if st := e.Status.BackupStatus[backup]; st != nil && st.State == string(longhorn.BackupStateCompleted) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	log.WithField("backup", backup).Info("The Engine object does not show the backup yet; its Backup object comes at the next poll of the target")
}
