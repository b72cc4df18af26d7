package csi

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cadence-storage/longhorn-manager/client"
)

// A CSI snapshot of type bi is a backing image exported from the volume
// (sourceType export-from-volume), named after the CSI snapshot, as
// Longhorn's driver makes it; its handle is Longhorn's
// bi://backing?backingImage=...&volume-name=... A volume made from it is
// a volume on that backing image.

// createBackingImage exports the volume as a backing image, or answers
// the one a call before made. The export reads the volume through its
// engine, so a detached volume is attached for it (without its frontend,
// as for a snapshot) and stays attached until the image's file is ready
// or has failed; the call that sees that, or DeleteSnapshot, detaches it.
// It answers at once, ready once a disk holds the image's whole file:
// the external-snapshotter calls again until then.
func (o *snapshotOp) createBackingImage(ctx context.Context) (*csi.CreateSnapshotResponse, error) {
	api := o.s.d.api
	bi, err := api.BackingImage(ctx, o.name)
	switch {
	case err == nil:
		return o.backingImageResponse(ctx, bi)
	case !client.IsNotFound(err):
		return nil, apiStatus(err, "read backing image "+o.name)
	}
	release, err := o.attach(ctx)
	if err != nil {
		return nil, err
	}
	created := false
	defer func() {
		if !created {
			release()
		}
	}()
	want := client.BackingImage{Name: o.name, SourceType: biSourceExport,
		Parameters: map[string]string{biKeyVolume: o.volume, biKeyExportType: o.class.exportType}}
	o.log.WithField("exportType", o.class.exportType).Info("Exporting the volume as a backing image for a CSI snapshot")
	err = api.CreateBackingImage(ctx, want)
	if err != nil && !isAlreadyExists(err) {
		return nil, apiStatus(err, "export volume "+o.volume+" as backing image "+o.name)
	}
	created = err == nil
	// Read it back (made by this call, or by another one meanwhile): the
	// API's cache shows it a moment after the create.
	deadline := time.Now().Add(madeMeanwhileWait)
	for {
		bi, err := api.BackingImage(ctx, o.name)
		switch {
		case err == nil:
			created = true // whoever made it, the volume stays attached for it
			return o.backingImageResponse(ctx, bi)
		case !client.IsNotFound(err):
			return nil, apiStatus(err, "read backing image "+o.name)
		case time.Now().After(deadline):
			if created {
				// Made, not shown yet: the next call finds it.
				return nil, status.Errorf(codes.Unavailable, "backing image %s: created, and the API does not show it yet", o.name)
			}
			return nil, status.Errorf(codes.Unavailable, "backing image %s: made by another request meanwhile, and the API does not show it yet", o.name)
		}
		select {
		case <-ctx.Done():
			return nil, apiStatus(ctx.Err(), "read backing image "+o.name)
		case <-time.After(pollState):
		}
	}
}

// exportedFrom says whether the backing image is the export of the
// volume in the format a handle or a class names: the image a bi CSI
// snapshot of that volume is, and not another of its name.
func exportedFrom(bi *client.BackingImage, volume, exportType string) bool {
	t := bi.Parameters[biKeyExportType]
	if t == "" {
		t = exportTypeRaw
	}
	return bi.SourceType == biSourceExport && bi.Parameters[biKeyVolume] == volume && t == exportType
}

// backingImageResponse answers the backing image a CreateSnapshot of
// type bi made: ready once a disk holds its whole file; a failed export
// is an error the VolumeSnapshot shows. The volume the driver attached
// for it is detached once the export has ended.
func (o *snapshotOp) backingImageResponse(ctx context.Context, bi *client.BackingImage) (*csi.CreateSnapshotResponse, error) {
	if !exportedFrom(bi, o.volume, o.class.exportType) {
		return nil, status.Errorf(codes.AlreadyExists, "backing image %s exists (%s %v), and is not the %s export of volume %s this CSI snapshot asks for",
			o.name, bi.SourceType, bi.Parameters, o.class.exportType, o.volume)
	}
	if bi.DeletionTimestamp != "" {
		return nil, status.Errorf(codes.Aborted, "backing image %s is being deleted; the call is to be made again once it is gone", o.name)
	}
	ready := bi.ReadyFile()
	failed := failedExport(bi)
	if ready || failed != "" {
		o.release(ctx)
	} else if _, err := o.attach(ctx); err != nil {
		// A call before attached the volume and detached it (a failed
		// export the manager tries again, a release that came early):
		// the export goes on only while it is attached.
		return nil, err
	}
	if failed != "" && !ready {
		return nil, status.Errorf(codes.Internal, "backing image %s exported from volume %s failed: %s", o.name, o.volume, failed)
	}
	size := bi.Size
	if v, err := o.s.d.api.Volume(ctx, o.volume); err == nil {
		// The volume's size, as Longhorn answers it: what a volume made
		// from it needs at least.
		size, _ = strconv.ParseInt(v.Size, 10, 64)
	} else if !client.IsNotFound(err) {
		return nil, apiStatus(err, "read volume "+o.volume)
	}
	h := snapshotHandle{kind: snapshotTypeBi, volume: o.volume, name: bi.Name, exportType: o.class.exportType}
	return &csi.CreateSnapshotResponse{Snapshot: &csi.Snapshot{
		SnapshotId: h.String(), SourceVolumeId: o.volume, SizeBytes: max(size, bi.Size),
		CreationTime: timestamppb.Now(), ReadyToUse: ready,
	}}, nil
}

// failedExport is why the image's every file failed, "" when one has
// not (or it has none yet).
func failedExport(bi *client.BackingImage) string {
	if len(bi.DiskFileStatusMap) == 0 {
		return ""
	}
	var why []string
	for _, f := range bi.DiskFileStatusMap {
		if f.State != "failed" {
			return ""
		}
		why = append(why, f.Message)
	}
	return strings.Join(why, "; ")
}

// deleteBackingImage deletes the backing image a bi handle names, only
// when it is that export of that volume (an image of the name made
// otherwise is not this CSI snapshot's), detaches the volume when the
// driver attached it for the export, and returns once the image is gone.
// One a volume uses is refused by the manager (FailedPrecondition), and
// the external-snapshotter calls again.
func (o *snapshotOp) deleteBackingImage(ctx context.Context, exportType string) error {
	api := o.s.d.api
	bi, err := api.BackingImage(ctx, o.name)
	if client.IsNotFound(err) {
		o.release(ctx)
		return nil
	} else if err != nil {
		return apiStatus(err, "read backing image "+o.name)
	}
	if !exportedFrom(bi, o.volume, exportType) {
		o.log.WithField("sourceType", bi.SourceType).Info("The backing image of the handle's name is not the handle's export: it is not this CSI snapshot's, and stays")
		return nil
	}
	o.release(ctx)
	if bi.DeletionTimestamp == "" {
		o.log.Info("Deleting the backing image of a CSI snapshot")
		if err := api.DeleteBackingImage(ctx, o.name); err != nil && !client.IsNotFound(err) {
			return apiStatus(err, "delete backing image "+o.name)
		}
	}
	return waitGone(ctx, "backing image "+o.name, func(ctx context.Context) (*client.BackingImage, error) {
		return api.BackingImage(ctx, o.name)
	})
}

// backingImageSource is a content source of a bi handle: a volume on the
// backing image it names, which must be that export of that volume, with
// a ready file.
func (s *controllerServer) backingImageSource(ctx context.Context, h snapshotHandle) (*contentSource, error) {
	id := h.String()
	bi, err := s.d.api.BackingImage(ctx, h.name)
	switch {
	case client.IsNotFound(err) || err == nil && (bi.DeletionTimestamp != "" || !exportedFrom(bi, h.volume, h.exportType)):
		return nil, status.Errorf(codes.NotFound, "volume_content_source: no backing image %s exported (%s) from volume %s", h.name, h.exportType, h.volume)
	case err != nil:
		return nil, apiStatus(err, "read backing image "+h.name)
	case !bi.ReadyFile():
		msg := ""
		if why := failedExport(bi); why != "" {
			msg = ": " + why
		}
		return nil, status.Errorf(codes.Unavailable, "volume_content_source: backing image %s has no ready file yet%s", h.name, msg)
	}
	return &contentSource{backingImage: h.name, what: "backing image " + id, size: bi.Size}, nil
}

// backingImageEntry is the CSI snapshot a bi handle names, for
// ListSnapshots; nil when the image is gone or is not that export.
func (s *controllerServer) backingImageEntry(ctx context.Context, h snapshotHandle) (*csi.Snapshot, error) {
	bi, err := s.d.api.BackingImage(ctx, h.name)
	if client.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, apiStatus(err, "read backing image "+h.name)
	}
	if bi.DeletionTimestamp != "" || !exportedFrom(bi, h.volume, h.exportType) {
		return nil, nil
	}
	return &csi.Snapshot{SnapshotId: h.String(), SourceVolumeId: h.volume, SizeBytes: bi.Size, CreationTime: timestamppb.Now(), ReadyToUse: bi.ReadyFile()}, nil
}
