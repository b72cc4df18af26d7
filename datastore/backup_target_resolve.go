package datastore

import (
	"context"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Target is a backup target as backups use it: "default" as the backup
// settings give it (what controller/backuptarget keeps default's spec in
// step with), any other from its BackupTarget's spec.
type Target struct {
	Name             string
	URL              string
	CredentialSecret string
	// PollInterval: 0 turns polling off.
	PollInterval time.Duration
	// Created is when its BackupTarget was made (zero for default
	// before there is one): of two targets at one place, the first made
	// holds it (HoldsFirst).
	Created time.Time
}

// HoldsFirst orders targets as they hold a place they share: the first
// made first, by name when made at once.
func HoldsFirst(a, b Target) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.Name < b.Name
}

// TargetName is name, or "default" when it is empty: what an object made
// before there were several targets, or naming none, belongs to.
func TargetName(name string) string {
	if name == "" {
		return DefaultBackupTargetName
	}
	return name
}

// JobBackupTarget is where a backup job's backups of v go: the job's
// spec.backupTargetName, else the volume's, else default.
func JobBackupTarget(job *longhorn.RecurringJob, v *longhorn.Volume) string {
	if job.Spec.BackupTargetName != "" {
		return job.Spec.BackupTargetName
	}
	return TargetName(v.Spec.BackupTargetName)
}

// credentialField names, in errors, where a target's credential Secret is
// set.
func (t Target) credentialField() string {
	if t.Name == DefaultBackupTargetName {
		return "the " + string(types.SettingNameBackupTargetCredentialSecret) + " setting"
	}
	return "BackupTarget " + t.Name + "'s spec.credentialSecret"
}

// GetTarget returns the backup target of that name ("" is default). A
// target that does not exist is an error apierrors.IsNotFound tells.
func (ds *DataStore) GetTarget(name string) (Target, error) {
	name = TargetName(name)
	if name == DefaultBackupTargetName {
		url, err := ds.GetSettingValue(types.SettingNameBackupTarget)
		if err != nil {
			return Target{}, err
		}
		secret, err := ds.GetSettingValue(types.SettingNameBackupTargetCredentialSecret)
		if err != nil {
			return Target{}, err
		}
		secs, err := ds.GetSettingAsInt(types.SettingNameBackupstorePollInterval)
		if err != nil {
			return Target{}, err
		}
		t := Target{Name: name, URL: url, CredentialSecret: secret, PollInterval: time.Duration(secs) * time.Second}
		if bt, err := ds.GetBackupTargetRO(name); err == nil {
			t.Created = bt.CreationTimestamp.Time
		}
		return t, nil
	}
	bt, err := ds.GetBackupTargetRO(name)
	if err != nil {
		return Target{}, err
	}
	return targetOf(bt), nil
}

func targetOf(bt *longhorn.BackupTarget) Target {
	return Target{Name: bt.Name, URL: bt.Spec.BackupTargetURL, CredentialSecret: bt.Spec.CredentialSecret, PollInterval: bt.Spec.PollInterval.Duration,
		Created: bt.CreationTimestamp.Time}
}

// ListTargets returns default and every other BackupTarget, by name.
func (ds *DataStore) ListTargets() ([]Target, error) {
	def, err := ds.GetTarget(DefaultBackupTargetName)
	if err != nil {
		return nil, err
	}
	out := []Target{def}
	bts, err := ds.ListBackupTargetsRO()
	if err != nil {
		return nil, err
	}
	for _, bt := range bts {
		if bt.Name != DefaultBackupTargetName {
			out = append(out, targetOf(bt))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// TargetForURL returns the backup target whose URL location names (a
// target URL, or a backup URL's target; backupstore.SameTarget), the one
// that holds the place when several share it (HoldsFirst: the others
// are refused). A location inside no target is an error saying so.
func (ds *DataStore) TargetForURL(location string) (Target, error) {
	targets, err := ds.ListTargets()
	if err != nil {
		return Target{}, err
	}
	sort.SliceStable(targets, func(i, j int) bool { return HoldsFirst(targets[i], targets[j]) })
	for _, t := range targets {
		if t.URL != "" && backupstore.SameTarget(t.URL, location) {
			return t, nil
		}
	}
	return Target{}, apierrors.NewNotFound(longhorn.Resource("backuptargets"), location)
}

// TargetCredential returns the data of the Secret t's credential names,
// nil when it names none. The Secret is read from the API each time
// (get only), so a changed credential applies at once. A missing or
// unreadable Secret is a *CredentialError naming where it is set.
func (ds *DataStore) TargetCredential(ctx context.Context, t Target) (map[string]string, error) {
	return ds.readCredential(ctx, t.CredentialSecret, t.credentialField())
}

// BackupTargetOf is the BackupTarget a Backup is in: its backup-target
// label, else its status, else default (an object made before there were
// several targets).
func BackupTargetOf(b *longhorn.Backup) string {
	if t := b.Labels[types.LabelBackupTarget]; t != "" {
		return t
	}
	return TargetName(b.Status.BackupTargetName)
}

// BackupVolumeTarget is the BackupTarget a BackupVolume is in.
func BackupVolumeTarget(bv *longhorn.BackupVolume) string {
	if bv.Spec.BackupTargetName != "" {
		return bv.Spec.BackupTargetName
	}
	return TargetName(bv.Labels[types.LabelBackupTarget])
}

// BackupVolumeVolume is the volume a BackupVolume holds the backups of:
// its spec's, else its name (an object made before there were several
// targets was named by its volume).
func BackupVolumeVolume(bv *longhorn.BackupVolume) string {
	if bv.Spec.VolumeName != "" {
		return bv.Spec.VolumeName
	}
	return bv.Name
}

// BackupVolumeObjectName is types.BackupVolumeObjectName.
func BackupVolumeObjectName(volume, target string) string {
	return types.BackupVolumeObjectName(volume, target)
}

// BackupVolumeObjectNames is types.BackupVolumeObjectNames.
func BackupVolumeObjectNames(volume, target string) []string {
	return types.BackupVolumeObjectNames(volume, target)
}

// FindBackupVolumeRO returns the cached BackupVolume of volume in target,
// nil when there is none.
func (ds *DataStore) FindBackupVolumeRO(target, volume string) (*longhorn.BackupVolume, error) {
	bvs, err := ds.ListBackupVolumesRO()
	if err != nil {
		return nil, err
	}
	target = TargetName(target)
	for _, bv := range bvs {
		if BackupVolumeTarget(bv) == target && BackupVolumeVolume(bv) == volume {
			return bv, nil
		}
	}
	return nil, nil
}

// BackupVolumeObjectOf is the name of the BackupVolume whose backups a
// backup URL (a volume's fromBackup) reads: the object of its volume in
// the target the URL names (default's when it names none), found by its
// volume and target (its name, computed, may be another volume's).
// Reading the backup needs get on it.
func (ds *DataStore) BackupVolumeObjectOf(backupURL string) (string, error) {
	target, volume, _, err := backupstore.ParseURL(backupURL)
	if err != nil {
		return "", err
	}
	targetName := DefaultBackupTargetName
	if t, err := ds.TargetForURL(target); err == nil {
		targetName = t.Name
	}
	if bv, err := ds.FindBackupVolumeRO(targetName, volume); err == nil && bv != nil {
		return bv.Name, nil
	}
	return BackupVolumeObjectName(volume, targetName), nil
}
