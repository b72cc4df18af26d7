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
	return m.updateVolume(ctx, name, func(v *longhorn.Volume) bool {
		if FreezeOf(v) == freeze {
			return false
		}
		v.Spec.FreezeFilesystemForSnapshot = freeze
		return true
	})
}

// updateVolume applies change to the volume as the apiserver has it, and
// writes it when change says it changed it, again on a conflict; a volume
// being deleted is not changed.
func (m *VolumeManager) updateVolume(ctx context.Context, name string, change func(*longhorn.Volume) bool) (*longhorn.Volume, error) {
	var result *longhorn.Volume
	err := datastore.RetryOnConflict(func() error {
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
		if !change(v) {
			result = v
			return nil
		}
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
