package csi

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// DeleteSnapshot deletes the Longhorn snapshot, the backup or the backing
// image a handle names, and returns once it is gone. One that does not exist (or a
// handle this driver never gives, which names nothing) is deleted
// already, as the spec has it.
func (s *controllerServer) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "snapshot_id: required")
	}
	h, err := parseSnapshotHandle(id)
	if err != nil {
		s.d.log.WithError(err).WithField("snapshotID", id).Info("DeleteSnapshot of an ID that names no snapshot of this driver: nothing to delete")
		return &csi.DeleteSnapshotResponse{}, nil
	}
	op := snapshotOp{s: s, volume: h.volume, name: h.name, kind: h.kind}
	op.log = s.d.log.WithFields(logrus.Fields{"volume": h.volume, "snapshot": h.String()})
	switch h.kind {
	case snapshotTypeSnap:
		err = op.deleteSnapshot(ctx)
	case snapshotTypeBi:
		err = op.deleteBackingImage(ctx, h.exportType)
	default:
		err = op.deleteBackup(ctx)
	}
	if err != nil {
		return nil, err
	}
	return &csi.DeleteSnapshotResponse{}, nil
}

// deleteSnapshot deletes the snapshot's object; the snapshot controller
// deletes the snapshot from the engine, which needs the volume attached:
// a detached volume is attached for it (as for its creation) and
// detached after.
func (o *snapshotOp) deleteSnapshot(ctx context.Context) error {
	api := o.s.d.api
	if _, err := api.SnapshotObject(ctx, o.volume, o.name); client.IsNotFound(err) {
		return nil // or its volume is gone, and its snapshots with it
	} else if err != nil {
		return apiStatus(err, "read snapshot "+o.name+" of volume "+o.volume)
	}
	release, err := o.attach(ctx)
	if err != nil {
		return err
	}
	defer release()
	o.log.Info("Deleting the Longhorn snapshot of a CSI snapshot")
	if err := api.DeleteSnapshotObject(ctx, o.volume, o.name); err != nil && !client.IsNotFound(err) {
		return apiStatus(err, "delete snapshot "+o.name+" of volume "+o.volume)
	}
	return waitGone(ctx, "snapshot "+o.name+" of volume "+o.volume, func(ctx context.Context) (*client.SnapshotObject, error) {
		return api.SnapshotObject(ctx, o.volume, o.name)
	})
}

// deleteBackup deletes the backup from the backup target it is in (the
// backup target controller does, for the Backup object's deletion), and detaches
// the volume when the driver attached it for the backup. The snapshot
// the backup was taken of stays, as Longhorn's driver leaves it: the
// volume's next backup builds on it.
func (o *snapshotOp) deleteBackup(ctx context.Context) error {
	api := o.s.d.api
	b, err := api.Backup(ctx, o.volume, o.name)
	if client.IsNotFound(err) {
		return nil
	} else if err != nil {
		return apiStatus(err, "read backup "+o.name+" of volume "+o.volume)
	}
	if b.SnapshotName != "" && checkHandleName(b.SnapshotName) == nil {
		// A VolumeSnapshot deleted before its backup ended.
		(&snapshotOp{s: o.s, volume: o.volume, name: b.SnapshotName, log: o.log}).release(ctx)
	}
	o.log.Info("Deleting the backup of a CSI snapshot from the backup target")
	if err := api.DeleteBackupIn(ctx, o.volume, b.BackupTargetName, o.name); err != nil && !client.IsNotFound(err) {
		return apiStatus(err, "delete backup "+o.name+" of volume "+o.volume)
	}
	return waitGone(ctx, "backup "+o.name+" of volume "+o.volume, func(ctx context.Context) (*client.Backup, error) {
		return api.Backup(ctx, o.volume, o.name)
	})
}

// waitGone waits until get answers 404.
func waitGone[T any](ctx context.Context, what string, get func(context.Context) (T, error)) error {
	ctx, cancel := context.WithTimeout(ctx, defaultWaitState)
	defer cancel()
	for {
		_, err := get(ctx)
		if client.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := what + ": not deleted in time"
			if err != nil {
				msg += ": " + err.Error()
			}
			return status.Error(codes.DeadlineExceeded, msg)
		case <-time.After(pollState):
		}
	}
}
