package app

import (
	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/fsfreeze"
	"github.com/cadence-storage/longhorn-manager/internal/fstrim"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
	"github.com/cadence-storage/longhorn-manager/types"
)

// freezeGuard freezes, for its snapshots, the filesystem of a volume whose
// freezeFilesystemForSnapshot is enabled, or ignored with the
// freeze-filesystem-for-snapshot setting true; found where the CSI Node
// service staged it on this node (locate).
func freezeGuard(log *logrus.Entry, ds *datastore.DataStore, locate fstrim.Trimmer) fsfreeze.Guard {
	return fsfreeze.Guard{
		Freezer: fsfreeze.Freezer{Locate: locate, Log: log.WithField("component", "fsfreeze")},
		Enabled: func(volume string) (bool, error) {
			v, err := ds.GetVolumeRO(volume)
			if err != nil {
				return false, err
			}
			switch manager.FreezeOf(v) {
			case longhorn.FreezeFilesystemForSnapshotEnabled:
				return true, nil
			case longhorn.FreezeFilesystemForSnapshotDisabled:
				return false, nil
			}
			return ds.GetSettingAsBool(types.SettingNameFreezeFilesystemForSnapshot)
		},
	}
}
