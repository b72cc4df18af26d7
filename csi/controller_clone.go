package csi

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/types"
)

// A CreateVolume with a volume_content_source makes a volume from another
// volume's data, as Longhorn's driver does:
//
//   - a volume (volume.volume_id, a PVC's dataSource) is cloned: the
//     volume's dataSource is vol://<volume>, and the manager takes a
//     snapshot of the source and copies it;
//   - a snapshot whose id is snap://<volume>/<snapshot> (a Longhorn
//     snapshot) is cloned: dataSource snap://<volume>/<snapshot>;
//   - a snapshot whose id is bak://<volume>/<backup> (a backup) is
//     restored: the volume's fromBackup is that backup's URL, as the
//     StorageClass's fromBackup parameter gives it;
//   - a snapshot whose id is a bi://backing?... handle (a backing image
//     exported from a volume) is a volume on that backing image.
//
// Everything is checked before the volume is made, so a refused request
// makes nothing. The call returns once the volume holds the data: a
// volume being filled is not ready for a workload (it does not attach
// before), and its PVC binds only when it is. Until then (a clone or a
// restore of a large volume, or one that failed and is tried again) the
// call answers Aborted, the spec's "operation pending for the volume",
// with how far it is or why it failed: the external-provisioner takes
// that for a provisioning in progress and calls again, with the same
// name, which finds the volume and waits again.

// contentSource is what a request's volume_content_source makes the
// volume from.
type contentSource struct {
	dataSource   string // vol://, snap://
	fromBackup   string // a backup's URL
	backingImage string // a bi handle's image
	// what names it in messages; size is the source's size in bytes.
	what string
	size int64
}

// readContentSource checks the request's volume_content_source and says
// what the volume is made from: nil for none. A malformed one is
// InvalidArgument, one that does not exist NotFound.
func (s *controllerServer) readContentSource(ctx context.Context, src *csi.VolumeContentSource, p *volumeParams) (*contentSource, error) {
	if src == nil {
		return nil, nil
	}
	if p.create.FromBackup != "" || p.create.BackingImage != "" {
		return nil, status.Errorf(codes.InvalidArgument, "volume_content_source: a volume is made from its content source, or from the StorageClass's %s or %s, not both", paramFromBackup, paramBackingImage)
	}
	switch {
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		if id == "" {
			return nil, status.Error(codes.InvalidArgument, "volume_content_source.volume.volume_id: required")
		}
		ds, err := types.ParseDataSource(types.DataSourceVolumePrefix + id)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume_content_source.volume.volume_id: %q is not a volume of this driver", id)
		}
		v, err := s.sourceVolume(ctx, id)
		if err != nil {
			return nil, err
		}
		size, _ := strconv.ParseInt(v.Size, 10, 64)
		return &contentSource{dataSource: ds.String(), what: "volume " + id, size: size}, nil
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		if !strings.Contains(id, "://") {
			// No handle of any kind: no snapshot this driver made, or
			// could read (csi-sanity holds a driver to NotFound here).
			return nil, status.Errorf(codes.NotFound, "volume_content_source: no snapshot has ID %q: the driver's are snap://<volume>/<snapshot> (a snapshot), bak://<volume>/<backup> (a backup) and bi://backing?... (a backing image)", id)
		}
		h, err := parseSnapshotHandle(id)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id: %v", err)
		}
		switch h.kind {
		case snapshotTypeBak:
			return s.backupSource(ctx, h)
		case snapshotTypeBi:
			return s.backingImageSource(ctx, h)
		}
		return s.snapshotSource(ctx, h)
	}
	return nil, status.Error(codes.InvalidArgument, "volume_content_source: names neither a volume nor a snapshot")
}

// sourceVolume reads the volume a content source names; NotFound when
// there is none (or it is being deleted).
func (s *controllerServer) sourceVolume(ctx context.Context, name string) (*client.Volume, error) {
	v, err := s.d.api.Volume(ctx, name)
	if client.IsNotFound(err) || (err == nil && v.State == volumeDeleting) {
		return nil, status.Errorf(codes.NotFound, "volume_content_source: source volume %s does not exist", name)
	}
	if err != nil {
		return nil, apiStatus(err, "read source volume "+name)
	}
	return v, nil
}

func (s *controllerServer) snapshotSource(ctx context.Context, h snapshotHandle) (*contentSource, error) {
	id := h.String()
	ds, err := types.ParseDataSource(id)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "volume_content_source.snapshot.snapshot_id: %v", err)
	}
	v, err := s.sourceVolume(ctx, ds.Volume)
	if err != nil {
		return nil, err
	}
	// The Snapshot object: it is there whether the volume is attached or
	// not, as a source usually is not.
	snap, err := s.d.api.SnapshotObject(ctx, ds.Volume, ds.Snapshot)
	switch {
	case client.IsNotFound(err) || (err == nil && snap.MarkRemoved):
		return nil, status.Errorf(codes.NotFound, "volume_content_source: volume %s has no snapshot %s", ds.Volume, ds.Snapshot)
	case err != nil:
		return nil, apiStatus(err, "read snapshot "+ds.Snapshot+" of volume "+ds.Volume)
	case !snap.ReadyToUse:
		msg := ""
		if snap.Error != "" {
			msg = ": " + snap.Error
		}
		return nil, status.Errorf(codes.Unavailable, "volume_content_source: snapshot %s of volume %s is not ready to use yet%s", ds.Snapshot, ds.Volume, msg)
	}
	size, _ := strconv.ParseInt(v.Size, 10, 64)
	return &contentSource{dataSource: ds.String(), what: "snapshot " + id, size: size}, nil
}

func (s *controllerServer) backupSource(ctx context.Context, h snapshotHandle) (*contentSource, error) {
	id, volume, backup := h.String(), h.volume, h.name
	b, err := s.d.api.Backup(ctx, volume, backup)
	switch {
	case client.IsNotFound(err):
		return nil, status.Errorf(codes.NotFound, "volume_content_source: no backup target has backup %s of volume %s", backup, volume)
	case err != nil:
		return nil, apiStatus(err, "read backup "+backup+" of volume "+volume)
	case b.State == "Error":
		return nil, status.Errorf(codes.FailedPrecondition, "volume_content_source: backup %s of volume %s failed: %s", backup, volume, b.Error)
	case b.State != "Completed" || b.URL == "":
		return nil, status.Errorf(codes.Unavailable, "volume_content_source: backup %s of volume %s is not complete yet (state %q)", backup, volume, b.State)
	}
	size, _ := strconv.ParseInt(b.VolumeSize, 10, 64)
	return &contentSource{fromBackup: b.URL, what: "backup " + id, size: size}, nil
}

// checkSize refuses a volume smaller than its source: OutOfRange, as the
// spec names it.
func (c *contentSource) checkSize(size int64) error {
	if c != nil && c.size > size {
		return status.Errorf(codes.OutOfRange, "volume_content_source: %s holds %d bytes, more than the %d the volume would have (capacity_range)", c.what, c.size, size)
	}
	return nil
}

// sameContentSource refuses, AlreadyExists, a request for a volume that
// exists by its name but was made from another source than the request
// asks (its content source, or the StorageClass's fromBackup). It reads
// only the request: the source may be gone by now, and a retry still
// finds the volume made from it.
func sameContentSource(v *client.Volume, src *csi.VolumeContentSource, params client.VolumeCreate) error {
	made := "no content source"
	switch {
	case v.DataSource != "":
		made = "dataSource " + v.DataSource
	case v.FromBackup != "":
		made = "backup " + v.FromBackup
	case v.BackingImage != "" && params.BackingImage == "":
		made = "backing image " + v.BackingImage
	}
	// A volume of a StorageClass's backingImage was made on it; one of
	// a bi handle too, with none in the class.
	plain := v.DataSource == "" && v.FromBackup == ""
	asked, same := "no content source", plain && (v.BackingImage == "" || v.BackingImage == params.BackingImage)
	switch {
	case src.GetVolume() != nil:
		asked = "volume " + src.GetVolume().GetVolumeId()
		same = v.DataSource == types.DataSourceVolumePrefix+src.GetVolume().GetVolumeId() && v.FromBackup == ""
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		asked = "snapshot " + id
		h, err := parseSnapshotHandle(id)
		switch {
		case err == nil && h.kind == snapshotTypeBak:
			_, volume, backup, err := backupstore.ParseURL(v.FromBackup)
			same = v.DataSource == "" && err == nil && volume == h.volume && backup == h.name
		case err == nil && h.kind == snapshotTypeBi:
			same = plain && v.BackingImage == h.name
		default:
			same = err == nil && v.DataSource == h.String() && v.FromBackup == ""
		}
	case params.FromBackup != "":
		asked = "backup " + params.FromBackup
		same = v.DataSource == "" && v.FromBackup == params.FromBackup
	}
	if !same {
		return status.Errorf(codes.AlreadyExists, "volume %s exists, made from %s, not from %s", v.Name, made, asked)
	}
	return nil
}

// sizeOf is a volume's size in bytes.
func sizeOf(v *client.Volume) int64 {
	n, _ := strconv.ParseInt(v.Size, 10, 64)
	return n
}

// populatedWait bounds how long a CreateVolume waits for a clone or a
// restore before it answers Aborted, for the provisioner to call again.
const populatedWait = 60 * time.Second

// waitPopulated waits until a volume made from a content source (or the
// StorageClass's fromBackup) holds it; Aborted, saying how far it is or
// why it failed, when that takes longer than the call may wait.
func (s *controllerServer) waitPopulated(ctx context.Context, name, dataSource, fromBackup string) error {
	if dataSource == "" && fromBackup == "" {
		return nil
	}
	wait := populatedWait
	if dl, ok := ctx.Deadline(); ok {
		// Answer before the caller gives up, so it hears why.
		wait = min(wait, time.Until(dl)-time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, max(wait, 0))
	defer cancel()
	var last *client.Volume
	for {
		v, err := s.d.api.Volume(ctx, name)
		if err == nil {
			last = v
			if populated(v) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return status.Errorf(codes.Aborted, "volume %s: %s; the call is to be made again", name, populating(last, dataSource, fromBackup))
		case <-time.After(pollState):
		}
	}
}

// populated reports whether the volume holds what it is made from.
func populated(v *client.Volume) bool {
	if v.DataSource != "" {
		return v.CloneStatus.State == "completed"
	}
	return v.Conditions["Restore"].Status == "True"
}

// populating says how far a volume is from holding its source.
func populating(v *client.Volume, dataSource, fromBackup string) string {
	what, cond := "cloned from "+dataSource, "Clone"
	if dataSource == "" {
		what, cond = "restored from "+fromBackup, "Restore"
	}
	if v == nil {
		return "not " + what + " yet"
	}
	c := v.Conditions[cond]
	if c.Message == "" {
		return "being " + what
	}
	if strings.HasSuffix(c.Reason, "Failed") {
		return fmt.Sprintf("not %s: %s (the manager tries again)", what, c.Message)
	}
	return fmt.Sprintf("being %s: %s", what, c.Message)
}
