package app

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/rpc"
)

// enginePolicy confines the engine service's backups and restores to the
// cluster's state: backups only to and from a backup target (the
// backup-target setting or a BackupTarget), opened with the credential
// its Secret holds; a restore only into a volume created from that very
// backup and not restored yet.
func enginePolicy(ds *datastore.DataStore) rpc.Policy {
	return rpc.Policy{
		BackupTarget: func(ctx context.Context, location string) (string, map[string]string, error) {
			return policyTarget(ctx, ds, location)
		},
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

// policyTarget is the backup target location names and its credential;
// "" when location is inside none.
func policyTarget(ctx context.Context, ds *datastore.DataStore, location string) (string, map[string]string, error) {
	t, err := ds.TargetForURL(location)
	if apierrors.IsNotFound(err) {
		targets, err := ds.ListTargets()
		if err != nil {
			return "", nil, err
		}
		for _, t := range targets {
			if t.URL != "" {
				return "", nil, nil
			}
		}
		return "", nil, rpc.ErrNoBackupTarget
	}
	if err != nil {
		return "", nil, err
	}
	cred, err := ds.TargetCredential(ctx, t)
	return t.URL, cred, err
}
