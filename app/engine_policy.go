package app

import (
	"context"
	"fmt"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
)

// enginePolicy confines the engine service's backups and restores to the
// cluster's state: backups only to and from the backup-target setting,
// opened with the credential its Secret holds; a restore only into a
// volume created from that very backup and not restored yet.
func enginePolicy(ds *datastore.DataStore) rpc.Policy {
	return rpc.Policy{
		BackupTarget: ds.GetBackupTarget,
		RestoreAllowed: func(_ context.Context, volume, backupURL string) error {
			v, err := ds.GetVolumeRO(volume)
			if err != nil {
				return err
			}
			if v.Spec.FromBackup == "" {
				return fmt.Errorf("volume %s is not being restored: it was not created from a backup (spec.fromBackup is empty)", volume)
			}
			if !sameBackup(v.Spec.FromBackup, backupURL) {
				return fmt.Errorf("volume %s is being restored from %s, not from %s", volume, v.Spec.FromBackup, backupURL)
			}
			if v.Status.RestoreInitiated && !v.Status.RestoreRequired {
				return fmt.Errorf("volume %s is restored already", volume)
			}
			return nil
		},
	}
}

// sameBackup reports whether two backup URLs name the same backup of the
// same volume in the same target.
func sameBackup(a, b string) bool {
	ta, va, ba, errA := backupstore.ParseURL(a)
	tb, vb, bb, errB := backupstore.ParseURL(b)
	return errA == nil && errB == nil && ta == tb && va == vb && ba == bb
}
