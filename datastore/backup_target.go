package datastore

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"

	"github.com/cadence-storage/longhorn-manager/types"
)

// CredentialError is a backup-target-credential-secret that cannot be
// read: the setting names a Secret that is missing or unreadable.
type CredentialError struct {
	Secret string
	Err    error
}

func (e *CredentialError) Error() string { return e.Err.Error() }
func (e *CredentialError) Unwrap() error { return e.Err }

// GetBackupTarget returns the backup-target setting and the data of the
// Secret the backup-target-credential-secret setting names (nil when it
// names none). The Secret is read from the API each time, with get only
// (no list or watch of Secrets), so a changed credential applies at once.
// A missing or unreadable Secret is a *CredentialError saying what to fix.
func (ds *DataStore) GetBackupTarget(ctx context.Context) (target string, cred map[string]string, err error) {
	target, err = ds.GetSettingValue(types.SettingNameBackupTarget)
	if err != nil {
		return "", nil, err
	}
	cred, err = ds.GetBackupTargetCredential(ctx)
	return target, cred, err
}

// GetBackupTargetCredential returns the data of the Secret the
// backup-target-credential-secret setting names, nil when it names none.
func (ds *DataStore) GetBackupTargetCredential(ctx context.Context) (map[string]string, error) {
	name, err := ds.GetSettingValue(types.SettingNameBackupTargetCredentialSecret)
	if err != nil {
		return nil, err
	}
	return ds.readCredential(ctx, name, "the "+string(types.SettingNameBackupTargetCredentialSecret)+" setting")
}

// readCredential returns the data of Secret name, nil when name is
// empty; field says, in errors, where the name is set.
func (ds *DataStore) readCredential(ctx context.Context, name, field string) (map[string]string, error) {
	if name == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	secret, err := ds.kubeClient.CoreV1().Secrets(ds.namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, &CredentialError{Secret: name, Err: fmt.Errorf("%s names Secret %q, which does not exist in namespace %s",
			field, name, ds.namespace)}
	case apierrors.IsForbidden(err):
		return nil, &CredentialError{Secret: name, Err: fmt.Errorf("%s names Secret %q, which the manager may not read: "+
			"name the Secret %s (Role %s), or grant get on it by name to the manager's account in a Role of your own (docs/deploying.md, \"Backup credentials\"): %w",
			field, name, types.BackupCredentialSecretName, types.BackupCredentialsRole, err)}
	case err != nil:
		return nil, &CredentialError{Secret: name, Err: fmt.Errorf("read Secret %q named by %s: %w", name, field, err)}
	}
	cred := make(map[string]string, len(secret.Data)+len(secret.StringData))
	for k, v := range secret.Data {
		cred[k] = string(v)
	}
	return cred, nil
}

// IsCredentialError reports whether err comes from reading the
// backup-target-credential-secret.
func IsCredentialError(err error) bool {
	var ce *CredentialError
	return errors.As(err, &ce)
}

// DefaultBackupTargetName is the BackupTarget kept in step with the
// backup-target, backup-target-credential-secret and
// backupstore-poll-interval settings, as Longhorn's.
const DefaultBackupTargetName = types.DefaultBackupTargetName

// ListBackupTargetsRO returns every cached BackupTarget.
func (ds *DataStore) ListBackupTargetsRO() ([]*longhorn.BackupTarget, error) {
	return ds.backupTargetLister.BackupTargets(ds.namespace).List(labels.Everything())
}

// GetBackupTargetRO returns the cached BackupTarget; the caller must not
// modify it.
func (ds *DataStore) GetBackupTargetRO(name string) (*longhorn.BackupTarget, error) {
	return ds.backupTargetLister.BackupTargets(ds.namespace).Get(name)
}

// GetBackupTargetFresh reads a BackupTarget from the API, for a
// read-modify-write.
func (ds *DataStore) GetBackupTargetFresh(ctx context.Context, name string) (*longhorn.BackupTarget, error) {
	return ds.lhClient.LonghornV1beta2().BackupTargets(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateBackupTarget creates a BackupTarget.
func (ds *DataStore) CreateBackupTarget(ctx context.Context, bt *longhorn.BackupTarget) (*longhorn.BackupTarget, error) {
	return ds.lhClient.LonghornV1beta2().BackupTargets(ds.namespace).Create(ctx, bt, metav1.CreateOptions{})
}

// UpdateBackupTarget writes a BackupTarget's metadata and spec.
func (ds *DataStore) UpdateBackupTarget(ctx context.Context, bt *longhorn.BackupTarget) (*longhorn.BackupTarget, error) {
	return ds.lhClient.LonghornV1beta2().BackupTargets(ds.namespace).Update(ctx, bt, metav1.UpdateOptions{})
}

// UpdateBackupTargetStatus writes a BackupTarget's status.
func (ds *DataStore) UpdateBackupTargetStatus(ctx context.Context, bt *longhorn.BackupTarget) (*longhorn.BackupTarget, error) {
	return ds.lhClient.LonghornV1beta2().BackupTargets(ds.namespace).UpdateStatus(ctx, bt, metav1.UpdateOptions{})
}

// DeleteBackupTarget deletes a BackupTarget.
func (ds *DataStore) DeleteBackupTarget(ctx context.Context, name string) error {
	return ds.lhClient.LonghornV1beta2().BackupTargets(ds.namespace).Delete(ctx, name, metav1.DeleteOptions{})
}
