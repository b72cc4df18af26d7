package manager

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ParseFreezeFilesystemForSnapshot checks a volume's
// freezeFilesystemForSnapshot: ignored (also ""), enabled or disabled.
func ParseFreezeFilesystemForSnapshot(value string) (longhorn.FreezeFilesystemForSnapshot, error) {
	switch f := longhorn.FreezeFilesystemForSnapshot(value); f {
	case "", longhorn.FreezeFilesystemForSnapshotDefault:
		return longhorn.FreezeFilesystemForSnapshotDefault, nil
	case longhorn.FreezeFilesystemForSnapshotEnabled, longhorn.FreezeFilesystemForSnapshotDisabled:
		return f, nil
	}
	return "", invalid("freezeFilesystemForSnapshot: must be ignored (the freeze-filesystem-for-snapshot setting decides), enabled or disabled, got %q", value)
}

// UpdateVolumeFreezeFilesystemForSnapshot sets whether the volume's
// snapshots freeze its mounted filesystem (Longhorn's
// updateFreezeFilesystemForSnapshot).
func (m *VolumeManager) UpdateVolumeFreezeFilesystemForSnapshot(ctx context.Context, name, value string) (*longhorn.Volume, error) {
	freeze, err := ParseFreezeFilesystemForSnapshot(value)
	if err != nil {
		return nil, err
	}
	var result *longhorn.Volume
	err = datastore.RetryOnConflict(func() error {
		v, err := m.ds.GetVolumeFresh(ctx, name)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: volume %q", ErrNotFound, name)
		}
		if err != nil {
			return err
		}
		if v.DeletionTimestamp != nil {
			return fmt.Errorf("%w: volume %q is being deleted", ErrConflict, name)
		}
		if FreezeOf(v) == freeze {
			result = v
			return nil
		}
		v.Spec.FreezeFilesystemForSnapshot = freeze
		result, err = m.ds.UpdateVolume(ctx, v)
		return err
	})
	return result, err
}

// FreezeOf is the volume's freezeFilesystemForSnapshot, ignored when
// unset.
func FreezeOf(v *longhorn.Volume) longhorn.FreezeFilesystemForSnapshot {
	if v.Spec.FreezeFilesystemForSnapshot == "" {
		return longhorn.FreezeFilesystemForSnapshotDefault
	}
	return v.Spec.FreezeFilesystemForSnapshot
}
