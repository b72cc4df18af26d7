package csi

import (
	"context"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cadence-storage/longhorn-manager/client"
)

const (
	backupCompleted = "Completed"
	backupError     = "Error"
	settingTarget   = "backup-target"
	// defaultBackupTargetName is the target the backup settings name.
	defaultBackupTargetName = "default"
)

// CreateSnapshot makes the Longhorn snapshot (type snap), the backup
// (type bak) or the backing image exported from the volume (type bi) a
// VolumeSnapshot asks for. It is idempotent by name: the same name of the
// same volume answers what the first call made, ready once the snapshot,
// the backup or the image's file is complete (the external-snapshotter
// calls again until it is); the name of another volume's is
// AlreadyExists.
func (s *controllerServer) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	switch {
	case req.GetName() == "":
		return nil, status.Error(codes.InvalidArgument, "name: required")
	case req.GetSourceVolumeId() == "":
		return nil, status.Error(codes.InvalidArgument, "source_volume_id: required")
	}
	class, err := parseSnapshotClass(req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	kind := class.kind
	if err := checkHandleName(req.GetSourceVolumeId()); err != nil {
		// No volume has such a name, and it would go into a path.
		return nil, status.Errorf(codes.NotFound, "source_volume_id: no volume %v", err)
	}
	op := snapshotOp{s: s, volume: req.GetSourceVolumeId(), name: snapshotName(req.GetName()), kind: kind, class: class}
	op.log = s.d.log.WithFields(logrus.Fields{"volume": op.volume, "snapshot": op.name, "type": kind})
	switch kind {
	case snapshotTypeSnap:
		return op.createSnapshot(ctx)
	case snapshotTypeBi:
		return op.createBackingImage(ctx)
	}
	return op.createBackup(ctx)
}

// snapshotOp is one CreateSnapshot or DeleteSnapshot on a volume.
type snapshotOp struct {
	s      *controllerServer
	volume string
	// name is the Longhorn snapshot's; a backup is of the snapshot of
	// that name; a bi snapshot's backing image has that name.
	name string
	kind string
	// class is what CreateSnapshot's parameters ask for.
	class snapshotClass
	log   *logrus.Entry
}

// attacher is who the driver attaches a detached volume as while it
// takes or deletes the snapshot name: the attach never takes the volume
// from a workload, and a workload's attach takes it over.
func attacher(snapshot string) string { return "csi-snapshot/" + snapshot }

// createSnapshot takes the Longhorn snapshot through the API's
// snapshotCreate (its Snapshot object appears as for any snapshot) and
// answers once the object is ready.
func (o *snapshotOp) createSnapshot(ctx context.Context) (*csi.CreateSnapshotResponse, error) {
	api := o.s.d.api
	snap, err := api.SnapshotObject(ctx, o.volume, o.name)
	switch {
	case err == nil && snap.ReadyToUse:
		// A call that attached the volume and stopped before detaching
		// it left it attached: detach it.
		o.release(ctx)
		return o.snapshotResponse(ctx, snap)
	case err != nil && !client.IsNotFound(err):
		return nil, apiStatus(err, "read snapshot "+o.name+" of volume "+o.volume)
	}
	exists := err == nil
	if !exists {
		if err := o.checkNameFree(ctx); err != nil {
			return nil, err
		}
	}
	release, err := o.attach(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	if !exists {
		o.log.Info("Taking a snapshot of the volume for a CSI snapshot")
		if err := api.CreateSnapshot(ctx, o.volume, o.name, map[string]string{paramSnapshotType: o.kind}); err != nil && !snapshotExists(ctx, api, o.volume, o.name) {
			return nil, apiStatus(err, "snapshot volume "+o.volume)
		}
	}
	snap, err = o.waitSnapshotReady(ctx)
	if err != nil {
		return nil, err
	}
	return o.snapshotResponse(ctx, snap)
}

// snapshotExists says whether the volume has a snapshot of the name: a
// create that failed because another call made it meanwhile.
func snapshotExists(ctx context.Context, api *client.Client, volume, name string) bool {
	_, err := api.SnapshotObject(ctx, volume, name)
	return err == nil
}

func (o *snapshotOp) snapshotResponse(ctx context.Context, snap *client.SnapshotObject) (*csi.CreateSnapshotResponse, error) {
	size := snap.RestoreSize
	if size <= 0 {
		v, err := o.s.d.api.Volume(ctx, o.volume)
		if err != nil {
			return nil, apiStatus(err, "read volume "+o.volume)
		}
		size, _ = strconv.ParseInt(v.Size, 10, 64)
	}
	h := snapshotHandle{kind: snapshotTypeSnap, volume: o.volume, name: snap.Name}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId: h.String(), SourceVolumeId: o.volume, SizeBytes: size,
		CreationTime: o.timestamp(snap.CreationTime), ReadyToUse: snap.ReadyToUse,
	}}, nil
}

// timestamp reads an RFC 3339 time the API gave; one it cannot read (it
// should not happen) is logged and answered as now, for creation_time is
// required.
func (o *snapshotOp) timestamp(t string) *timestamppb.Timestamp {
	if t == "" {
		return timestamppb.Now() // not taken yet
	}
	parsed, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		o.log.WithField("time", t).Warn("The snapshot's creation time is not an RFC 3339 time: answering now")
		parsed = time.Now()
	}
	return timestamppb.New(parsed)
}

// waitSnapshotReady waits until the snapshot's object is ready to use.
func (o *snapshotOp) waitSnapshotReady(ctx context.Context) (*client.SnapshotObject, error) {
	ctx, cancel := context.WithTimeout(ctx, defaultWaitState)
	defer cancel()
	for {
		snap, err := o.s.d.api.SnapshotObject(ctx, o.volume, o.name)
		if err == nil && snap.ReadyToUse {
			return snap, nil
		}
		select {
		case <-ctx.Done():
			msg := "snapshot " + o.name + " of volume " + o.volume + ": not ready in time"
			switch {
			case err != nil:
				msg += ": " + err.Error()
			case snap.Error != "":
				msg += ": " + snap.Error
			}
			return nil, status.Error(codes.DeadlineExceeded, msg)
		case <-time.After(pollState):
		}
	}
}

// checkNameFree refuses a name another volume's snapshot or backup has:
// a Snapshot object's name is the cluster's, and the external-snapshotter
// asks by name.
func (o *snapshotOp) checkNameFree(ctx context.Context) error {
	api := o.s.d.api
	volumes, err := api.Volumes(ctx)
	if err != nil {
		return apiStatus(err, "list volumes")
	}
	for _, v := range volumes {
		if v.Name == o.volume {
			continue
		}
		if _, err := api.SnapshotObject(ctx, v.Name, o.name); err == nil {
			return status.Errorf(codes.AlreadyExists, "snapshot %s is of volume %s, not of %s", o.name, v.Name, o.volume)
		} else if !client.IsNotFound(err) {
			return apiStatus(err, "read snapshot "+o.name+" of volume "+v.Name)
		}
	}
	if o.kind != snapshotTypeBak {
		return nil
	}
	backupVolumes, err := api.BackupVolumes(ctx)
	if err != nil {
		return apiStatus(err, "list backup volumes")
	}
	for _, bv := range backupVolumes {
		if bv == o.volume {
			continue
		}
		b, err := findBackup(ctx, api, bv, o.name)
		if err != nil {
			return apiStatus(err, "list backups of volume "+bv)
		}
		if b != nil {
			return status.Errorf(codes.AlreadyExists, "backup %s of snapshot %s is of volume %s, not of %s", b.Name, o.name, bv, o.volume)
		}
	}
	return nil
}

// attach makes sure the volume is attached for its snapshot: a detached
// volume is attached, without its frontend, to the node of its replicas
// as attacher(o.name); release detaches it again, unless a workload has
// taken it over meanwhile. A volume a workload (or anyone else) attaches
// is used as it is, and release does nothing.
func (o *snapshotOp) attach(ctx context.Context) (release func(), err error) {
	api := o.s.d.api
	by := attacher(o.name)
	// Decide on a volume that has settled: one still detaching (a call
	// before released it, say) would seem attached until its engine stops
	// under the snapshot.
	var v *client.Volume
	if err := o.s.waitVolume(ctx, o.volume, "attached or detached", func(got *client.Volume) bool {
		v = got
		return got == nil || got.State == volumeDeleting || settled(got)
	}); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "volume %s not found", o.volume)
	}
	if v.State == volumeDeleting {
		return nil, status.Errorf(codes.NotFound, "volume %s is being deleted", o.volume)
	}
	node := v.NodeID
	if v.NodeID == "" || v.AttachedBy == by {
		if node = v.ReplicasNode(); node == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is detached and none of its replicas is placed on a node: it cannot be attached to take its snapshot", o.volume)
		}
		o.log.WithField("node", node).Info("Attaching the detached volume, without its frontend, to take or delete its CSI snapshot")
		if err := api.Attach(ctx, o.volume, node, by); err != nil {
			st := apiStatus(err, "attach volume "+o.volume)
			if status.Code(st) == codes.FailedPrecondition {
				// Another CSI snapshot or a recurring job's run has it
				// attached (409): try again once it is done.
				return nil, status.Errorf(codes.Aborted, "volume %s: %s", o.volume, status.Convert(st).Message())
			}
			return nil, st
		}
	}
	release = func() {}
	if v.NodeID == "" || v.AttachedBy == by {
		release = func() { o.release(context.WithoutCancel(ctx)) }
	}
	if err := o.s.waitVolume(ctx, o.volume, "attached to node "+node, func(v *client.Volume) bool {
		// spec.nodeID too: a status from before a detach still pending
		// (the API's cache lagging it) says attached as well.
		return v != nil && v.NodeID == node && v.State == "attached" && v.CurrentNodeID == node
	}); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// release detaches the volume when the driver attached it for the
// snapshot o.name and it is still the driver's.
func (o *snapshotOp) release(ctx context.Context) {
	by := attacher(o.name)
	v, err := o.s.d.api.Volume(ctx, o.volume)
	if err != nil || v.AttachedBy != by || v.NodeID == "" {
		return
	}
	if err := o.s.d.api.Detach(ctx, o.volume, by); err != nil && !client.IsNotFound(err) {
		o.log.WithError(err).Warn("Could not detach the volume attached for a CSI snapshot; the next call for it detaches it")
		return
	}
	o.log.Info("Detached the volume attached for a CSI snapshot")
	// The API answers reads from its cache, which brings the detach a
	// moment later. Until it does, the next call on the volume would read
	// it attached as before (its engine about to stop under it): wait
	// until the API shows the detach asked for.
	if err := o.s.pollVolume(ctx, o.volume, "shown detached by the API", cacheLagWait, cacheLagPoll, func(v *client.Volume) bool {
		return v == nil || v.NodeID == "" || v.AttachedBy != by
	}); err != nil {
		o.log.WithError(err).Warn("The API does not show the detach yet; going on")
	}
}

// settled says whether a volume is where it is asked to be: detached, or
// attached on the node it is to be attached to.
func settled(v *client.Volume) bool {
	if v.NodeID == "" {
		return v.State == "detached"
	}
	return v.State == "attached" && v.CurrentNodeID == v.NodeID
}
