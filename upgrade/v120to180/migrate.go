// Package v120to180 brings in Longhorn v1.8's BackupTarget: the "default"
// target made from the backup-target, backup-target-credential-secret and
// backupstore-poll-interval settings, which controller/backuptarget then
// keeps in step with them.
package v120to180

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

// Migrate creates "default" from the settings unless it exists; one that
// exists is left as it is (the controller reconciles it with the
// settings). A setting that does not exist yet (a new cluster: the
// settings are made after the upgrade) or holds a value its rule refuses
// gives its default, as the manager reads it.
func Migrate(ctx context.Context, c step.Clients) error {
	targets := c.Longhorn.LonghornV1beta2().BackupTargets(c.Namespace)
	err := c.Call(ctx, "get BackupTarget "+datastore.DefaultBackupTargetName, func(ctx context.Context) error {
		_, err := targets.Get(ctx, datastore.DefaultBackupTargetName, metav1.GetOptions{})
		return err
	})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("read BackupTarget %s: %w", datastore.DefaultBackupTargetName, err)
	}
	values := map[types.SettingName]string{}
	for _, f := range datastore.BackupTargetFields {
		if values[f.Setting], err = settingValue(ctx, c, f.Setting); err != nil {
			return err
		}
	}
	bt, err := datastore.NewDefaultBackupTarget(values)
	if err != nil {
		return err
	}
	err = c.Call(ctx, "create BackupTarget "+bt.Name, func(ctx context.Context) error {
		_, err := targets.Create(ctx, bt, metav1.CreateOptions{})
		return err
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create BackupTarget %s from the backup settings: %w", bt.Name, err)
	}
	if c.Log != nil {
		c.Log.WithField("backupTarget", bt.Name).WithField("url", bt.Spec.BackupTargetURL).Info("Made the default backup target from the backup settings")
	}
	return c.Step("create BackupTarget " + bt.Name)
}

func settingValue(ctx context.Context, c step.Clients, name types.SettingName) (string, error) {
	def, _ := types.GetSettingDefinition(name)
	var s *longhorn.Setting
	err := c.Call(ctx, "get Setting "+string(name), func(ctx context.Context) (err error) {
		s, err = c.Longhorn.LonghornV1beta2().Settings(c.Namespace).Get(ctx, string(name), metav1.GetOptions{})
		return err
	})
	switch {
	case apierrors.IsNotFound(err):
		return def.Default, nil
	case err != nil:
		return "", fmt.Errorf("read setting %s: %w", name, err)
	case types.ValidateSetting(name, s.Value) != nil:
		if c.Log != nil {
			c.Log.WithField("setting", name).WithField("value", s.Value).Warn("The setting's value breaks its rule; the default backup target takes the setting's default")
		}
		return def.Default, nil
	}
	return s.Value, nil
}
