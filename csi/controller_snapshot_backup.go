package csi

import (
	"context"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// createBackup backs the volume up as Longhorn's driver does: a snapshot
// named for the CSI snapshot, and a backup of it in the backup target.
// The answer names the backup as soon as it is known, ready once the
// backup is Completed. A volume the driver attached for it stays attached
// until the backup ends (the engine reads the snapshot), and is detached
// by the next call that sees it ended, or by DeleteSnapshot.
func (o *snapshotOp) createBackup(ctx context.Context) (*csi.CreateSnapshotResponse, error) {
	api := o.s.d.api
	// The backup may outlive its volume, or the volume's target may have
	// changed since it began: look for it first, in every target.
	b, err := findBackup(ctx, api, o.volume, o.name)
	if err != nil {
		return nil, apiStatus(err, "list backups of volume "+o.volume)
	}
	if b != nil {
		return o.backupResponse(ctx, b)
	}
	if err := o.checkTarget(ctx); err != nil {
		return nil, err
	}
	if _, err := api.SnapshotObject(ctx, o.volume, o.name); client.IsNotFound(err) {
		if err := o.checkNameFree(ctx); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, apiStatus(err, "read snapshot "+o.name+" of volume "+o.volume)
	}
	release, err := o.attach(ctx)
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			release()
		}
	}()
	if _, err := api.SnapshotObject(ctx, o.volume, o.name); client.IsNotFound(err) {
		o.log.Info("Taking a snapshot of the volume to back up for a CSI snapshot")
		if err := api.CreateSnapshot(ctx, o.volume, o.name, map[string]string{paramSnapshotType: o.kind}); err != nil && !snapshotExists(ctx, api, o.volume, o.name) {
			return nil, apiStatus(err, "snapshot volume "+o.volume)
		}
	} else if err != nil {
		return nil, apiStatus(err, "read snapshot "+o.name+" of volume "+o.volume)
	}
	if _, err := o.waitSnapshotReady(ctx); err != nil {
		return nil, err
	}
	// The class's backupMode and labels, as Longhorn's driver passes them.
	name, err := api.BackupSnapshotMode(ctx, o.volume, o.name, o.class.labels, o.class.backupMode)
	if err != nil {
		return nil, apiStatus(err, "back up snapshot "+o.name+" of volume "+o.volume)
	}
	started = true
	o.log.WithField("backup", name).Info("Backing up the snapshot for a CSI snapshot")
	// A retry finds the backup by its snapshot's name once the Backup
	// object is there: until it is, a retry would start another backup.
	b, err = o.waitBackupListed(ctx, name)
	if err != nil {
		return nil, err
	}
	return o.backupResponse(ctx, b)
}

// checkTarget refuses a backup of a volume whose backups go to the
// default target while the backup-target setting is empty, before the
// volume is attached for it. A volume whose spec.backupTargetName names
// another target backs up there; the API refuses one with no URL, naming
// it.
func (o *snapshotOp) checkTarget(ctx context.Context) error {
	api := o.s.d.api
	v, err := api.Volume(ctx, o.volume)
	if err != nil {
		return apiStatus(err, "read volume "+o.volume)
	}
	if v.BackupTargetName != "" && v.BackupTargetName != defaultBackupTargetName {
		return nil
	}
	target, err := api.Setting(ctx, settingTarget)
	if err != nil {
		return apiStatus(err, "read the "+settingTarget+" setting")
	}
	if target == "" {
		return status.Errorf(codes.FailedPrecondition, "the %s setting is empty: a VolumeSnapshotClass of type bak backs volumes up to the backup target; set one, or use type snap for a snapshot kept in the cluster", settingTarget)
	}
	return nil
}

// backupResponse answers a backup: ready once Completed; a failed backup
// is an error the VolumeSnapshot shows, and the volume the driver
// attached for it is detached once it has ended.
func (o *snapshotOp) backupResponse(ctx context.Context, b *client.Backup) (*csi.CreateSnapshotResponse, error) {
	if b.State == backupCompleted || b.State == backupError || b.Error != "" {
		o.release(ctx)
	}
	if b.State == backupError || b.Error != "" {
		return nil, status.Errorf(codes.Internal, "backup %s of snapshot %s of volume %s failed: %s", b.Name, o.name, o.volume, b.Error)
	}
	size, err := strconv.ParseInt(b.VolumeSize, 10, 64)
	if err != nil || size <= 0 {
		v, verr := o.s.d.api.Volume(ctx, o.volume)
		if verr != nil {
			return nil, apiStatus(verr, "read volume "+o.volume)
		}
		size, _ = strconv.ParseInt(v.Size, 10, 64)
	}
	created := b.SnapshotCreated
	if created == "" {
		if snap, err := o.s.d.api.SnapshotObject(ctx, o.volume, o.name); err == nil {
			created = snap.CreationTime
		}
	}
	h := snapshotHandle{kind: snapshotTypeBak, volume: o.volume, name: b.Name}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId: h.String(), SourceVolumeId: o.volume, SizeBytes: size,
		CreationTime: o.timestamp(created), ReadyToUse: b.State == backupCompleted,
	}}, nil
}

// waitBackupListed waits until the API lists the backup just started.
func (o *snapshotOp) waitBackupListed(ctx context.Context, name string) (*client.Backup, error) {
	ctx, cancel := context.WithTimeout(ctx, defaultWaitState)
	defer cancel()
	for {
		b, err := o.s.d.api.Backup(ctx, o.volume, name)
		if err == nil {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.Errorf(codes.DeadlineExceeded, "backup %s of volume %s: not listed in time: %v", name, o.volume, err)
		case <-time.After(pollState):
		}
	}
}

// findBackup is the backup of the volume's snapshot of that name, in
// whichever target holds it, nil when there is none.
func findBackup(ctx context.Context, api *client.Client, volume, snapshot string) (*client.Backup, error) {
	backups, err := api.AllBackups(ctx, volume)
	if err != nil {
		return nil, err
	}
	for i := range backups {
		if backups[i].SnapshotName == snapshot {
			return &backups[i], nil
		}
	}
	return nil, nil
}
