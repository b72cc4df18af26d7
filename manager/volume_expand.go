package manager

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ExpandSizeAlignment is the unit a volume grows by, Longhorn's: a size
// asked for is rounded up to a multiple of 2 MiB.
const ExpandSizeAlignment = 2 << 20

// ExpandVolume grows volume name to size bytes (rounded up to a multiple
// of ExpandSizeAlignment) by raising its spec.size; the volume's engine
// grows its replicas while it runs, or when it next starts for a
// detached volume. A size below the volume's is refused naming size (a
// volume never shrinks), and so is one no ready disk has room for (as at
// create); the same size answers the volume as it is.
func (m *VolumeManager) ExpandVolume(ctx context.Context, name string, size int64) (*longhorn.Volume, error) {
	if size <= 0 {
		return nil, invalid("size: must be greater than 0, got %d", size)
	}
	if rounded := (size + ExpandSizeAlignment - 1) / ExpandSizeAlignment * ExpandSizeAlignment; rounded > 0 {
		size = rounded
	}
	var result *longhorn.Volume
	err := datastore.RetryOnConflict(func() error {
		v, err := m.ds.GetVolumeFresh(ctx, name)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: volume %q", ErrNotFound, name)
		}
		if err != nil {
			return err
		}
		switch {
		case v.DeletionTimestamp != nil:
			return fmt.Errorf("%w: volume %q is being deleted", ErrConflict, name)
		case size < v.Spec.Size:
			return invalid("size: %d bytes is below the volume's %d: a volume never shrinks", size, v.Spec.Size)
		case size == v.Spec.Size:
			result = v
			return nil
		}
		if err := m.checkExpandCapacity(v, size); err != nil {
			return err
		}
		v.Spec.Size = size
		result, err = m.ds.UpdateVolume(ctx, v)
		if apierrors.IsInvalid(err) {
			return fmt.Errorf("%w: %v", ErrInvalidInput, err)
		}
		return err
	})
	return result, err
}

// checkExpandCapacity refuses a size the disk that holds the volume's
// replicas has no room for: the room checkCapacity counts, the volume's
// own replicas left out of what the disk holds. A volume with no replica
// yet is checked as a new one of that size.
func (m *VolumeManager) checkExpandCapacity(v *longhorn.Volume, size int64) error {
	grown := v.Spec
	grown.Size = size
	replicas, err := m.ds.ListVolumeReplicasRO(v.Name)
	if err != nil {
		return err
	}
	if len(replicas) == 0 {
		return m.checkCapacity(grown)
	}
	return m.checkCapacityOn(grown, replicas[0].Spec.DiskID, v.Name)
}
