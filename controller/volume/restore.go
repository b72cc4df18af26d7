package volume

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/engine/instance"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// restore writes the volume's fromBackup into its new replicas, through an
// engine started without a frontend, before the volume may attach.
func (c *Controller) restore(ctx context.Context, v *longhorn.Volume, dirs []instance.ReplicaDir) error {
	target, volume, backup, err := backupstore.ParseURL(v.Spec.FromBackup)
	if err != nil {
		return err
	}
	// The backup-target-credential-secret opens the backup's target, as
	// Longhorn does, whichever target the backup URL names.
	var cred map[string]string
	if backupstore.UsesCredential(target) {
		if cred, err = c.ds.GetBackupTargetCredential(ctx); err != nil {
			return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
		}
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	info, err := store.Get(volume, backup)
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	if err := c.checkRestoreBackingImage(v, info); err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	_, wasRunning := c.instances.Get(v.Name)
	run, err := c.instances.Start(v.Name, v.Spec.Size, dirs, false)
	if err != nil {
		return err
	}
	start := time.Now()
	err = func() (err error) {
		// A panic in the restore (a malformed backup, a bug) is its error:
		// the engine started for it stops, and the volume says why.
		defer panics.Recover(c.Logger.WithFields(logrus.Fields{"volume": v.Name, "fromBackup": v.Spec.FromBackup}), &err)
		return run.Engine.Restore(store, volume, backup)
	}()
	if !wasRunning {
		if stopErr := c.instances.Stop(v.Name); err == nil {
			err = stopErr
		}
	}
	if err != nil {
		return fmt.Errorf("restore volume %s from %s: %w", v.Name, v.Spec.FromBackup, err)
	}
	c.Logger.WithFields(logrus.Fields{"volume": v.Name, "backup": backup, "took": time.Since(start).Round(time.Millisecond)}).Info("Restored volume from backup")
	return nil
}
