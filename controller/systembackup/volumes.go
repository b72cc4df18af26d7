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

// needsBackup is the policy's decision for one volume, given the newest
// backup the default target holds of it ("" for none).
func needsBackup(p longhorn.SystemBackupCreateVolumeBackupPolicy, newest string) bool {
	switch p {
	case longhorn.SystemBackupCreateVolumeBackupPolicyAlways:
		return true
	case longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent:
		return newest == ""
	}
	return false
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
		info, err := t.store.Volume(v.Name)
		if err != nil && !errors.Is(err, backupstore.ErrNotExist) {
			return nil, fmt.Errorf("volume %s: read its backups in the target: %w", v.Name, err)
		}
		newest := volumeBackup{}
		if info != nil {
			newest = volumeBackup{name: info.LastBackupName, at: info.LastBackupAt}
		}
		if !needsBackup(policy, newest.name) {
			if newest.name != "" && policy != longhorn.SystemBackupCreateVolumeBackupPolicyDisabled {
				out[v.Name] = newest
			}
			continue
		}
		made, err := c.backupVolume(ctx, sb, v, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s: %w", v.Name, err))
			continue
		}
		out[v.Name] = made
	}
	return out, errors.Join(errs...)
}

// backupVolume takes a snapshot of an attached volume and backs it up to
// the default target, waiting for the backup.
func (c *BackupController) backupVolume(ctx context.Context, sb *longhorn.SystemBackup, v *longhorn.Volume, t target) (volumeBackup, error) {
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
	name, err := client.SnapshotBackup(ctx, engineapi.BackupRequest{Name: backupstore.NewBackupName(), Snapshot: snap, Target: t.URL,
		Credential: t.cred, Labels: labels, Compression: compression, Concurrency: concurrency})
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
