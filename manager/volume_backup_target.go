package manager

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// UpdateVolumeBackupTarget sets the BackupTarget the volume's backups go
// to (spec.backupTargetName; "" or "default" is default, stored as
// default). The target must exist. Backups already made stay where they
// are; the volume's next backup goes to the new target.
func (m *VolumeManager) UpdateVolumeBackupTarget(ctx context.Context, name, target string) (*longhorn.Volume, error) {
	target = datastore.TargetName(target)
	if _, err := m.ds.GetTarget(target); apierrors.IsNotFound(err) {
		return nil, invalid("backupTargetName: BackupTarget %q does not exist; create it first (POST /v1/backuptargets) or name an existing one", target)
	} else if err != nil {
		return nil, err
	}
	return m.updateVolume(ctx, name, func(v *longhorn.Volume) bool {
		if v.Spec.BackupTargetName == target {
			return false
		}
		v.Spec.BackupTargetName = target
		return true
	})
}
