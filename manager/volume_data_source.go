package manager

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// checkDataSource refuses a volume whose spec.dataSource (a clone of
// another volume, vol://<volume> or snap://<volume>/<snapshot>) cannot be
// made: a malformed one, one beside fromBackup or a backing image (the
// clone holds its source's bytes, and only those), a source volume or
// snapshot that does not exist (ErrNotFound) or cannot be read, and a
// volume smaller than its source. The volume controller checks again when
// it clones: what is found here may change before.
func (m *VolumeManager) checkDataSource(ctx context.Context, spec longhorn.VolumeSpec) error {
	if spec.DataSource == "" {
		return nil
	}
	ds, err := types.ParseDataSource(spec.DataSource)
	switch {
	case err != nil:
		return invalid("dataSource: %v", err)
	case spec.FromBackup != "":
		return invalid("dataSource: a volume is made from a backup (fromBackup) or from another volume (dataSource), not both")
	case spec.BackingImage != "":
		return invalid("dataSource: a clone holds its source's bytes, those of the source's backing image included; leave backingImage empty")
	}
	// Made a moment ago, the cache may not have it yet (a client that
	// creates a volume and clones it at once).
	src, err := datastore.CachedOrFresh(ctx, ds.Volume, m.ds.GetVolumeRO, m.ds.GetVolumeFresh)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: dataSource %s: source volume %q does not exist", ErrNotFound, spec.DataSource, ds.Volume)
	}
	if err != nil {
		return err
	}
	if src.DeletionTimestamp != nil {
		return invalid("dataSource %s: source volume %q is being deleted", spec.DataSource, ds.Volume)
	}
	if spec.Size < src.Spec.Size {
		return invalid("size: %d bytes is less than the %d bytes of source volume %q (dataSource %s): a clone is at least its source's size",
			spec.Size, src.Spec.Size, ds.Volume, spec.DataSource)
	}
	if ds.Snapshot == "" {
		return nil
	}
	snap, err := m.ds.GetSnapshotRO(ds.Snapshot)
	if apierrors.IsNotFound(err) || (err == nil && (snap.Spec.Volume != ds.Volume || !snap.Status.ReadyToUse)) {
		// The cache may be behind the object, or its status.
		snap, err = m.ds.GetSnapshotFresh(ctx, ds.Snapshot)
	}
	if apierrors.IsNotFound(err) || (err == nil && snap.Spec.Volume != ds.Volume) {
		return fmt.Errorf("%w: dataSource %s: volume %q has no snapshot %q", ErrNotFound, spec.DataSource, ds.Volume, ds.Snapshot)
	}
	if err != nil {
		return err
	}
	switch {
	case snap.DeletionTimestamp != nil || snap.Status.MarkRemoved:
		return invalid("dataSource %s: snapshot %q of volume %q is deleted", spec.DataSource, ds.Snapshot, ds.Volume)
	case !snap.Status.ReadyToUse:
		return invalid("dataSource %s: snapshot %q of volume %q is not ready to use yet%s", spec.DataSource, ds.Snapshot, ds.Volume, snapshotError(snap))
	}
	return nil
}

func snapshotError(s *longhorn.Snapshot) string {
	if s.Status.Error == "" {
		return ""
	}
	return ": " + s.Status.Error
}
