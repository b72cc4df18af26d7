package api

import (
	"context"
	"net/http"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/types"
)

// VolumeBackupTargetInput is the body of updateBackupTargetName.
type VolumeBackupTargetInput struct {
	BackupTargetName string `json:"backupTargetName"`
}

// updateBackupTargetName is Longhorn's choice of a volume's backup target
// (spec.backupTargetName): empty is default; a target that does not
// exist is refused naming the field.
func (s *Server) updateBackupTargetName(w http.ResponseWriter, r *http.Request, name string) error {
	var in VolumeBackupTargetInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	v, err := s.vm.UpdateVolumeBackupTarget(r.Context(), name, in.BackupTargetName)
	if err != nil {
		return err
	}
	s.logger.WithFields(logrus.Fields{"volume": name, "backupTarget": v.Spec.BackupTargetName}).Info("Volume backup target set: its next backups go there")
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}

// volumeBackupTarget is the target a backup of volume goes to, and its
// credential: asked (a recurring job's target), else the volume's
// spec.backupTargetName, else default. A target that does not exist, has
// no URL, is at a place another target holds, or whose credential Secret
// cannot be read is refused naming what to fix.
func (s *Server) volumeBackupTarget(ctx context.Context, volume, asked string) (datastore.Target, map[string]string, error) {
	name, field := asked, "backupTargetName"
	if name == "" {
		// From the apiserver, not the cache: a backup asked right after
		// updateBackupTargetName goes to the target it set.
		v, err := s.ds.GetVolumeFresh(ctx, volume)
		if apierrors.IsNotFound(err) {
			return datastore.Target{}, nil, notFound("volume %q not found", volume)
		}
		if err != nil {
			return datastore.Target{}, nil, err
		}
		name, field = datastore.TargetName(v.Spec.BackupTargetName), "the volume's spec.backupTargetName"
	}
	t, err := s.ds.GetTarget(name)
	if apierrors.IsNotFound(err) {
		return t, nil, badRequest("%s: BackupTarget %q does not exist", field, name)
	}
	if err != nil {
		return t, nil, err
	}
	if t.URL == "" {
		if t.Name == datastore.DefaultBackupTargetName {
			return t, nil, badRequest("the %s setting is empty: set a backup target first", types.SettingNameBackupTarget)
		}
		return t, nil, badRequest("%s: BackupTarget %q has no spec.backupTargetURL: set one first", field, name)
	}
	if holder, err := s.ds.TargetForURL(t.URL); err == nil && holder.Name != t.Name {
		// Made with kubectl at another target's place: refused, as the
		// backup target controller refuses to read it; its backups would
		// be the other target's.
		return t, nil, badRequest("%s: backup target %s keeps its backups where backup target %s does (%s), which was there first; two targets may not share a place: give one of them another URL",
			field, t.Name, holder.Name, holder.URL)
	}
	var cred map[string]string
	if backupstore.UsesCredential(t.URL) {
		cred, err = s.ds.TargetCredential(ctx, t)
		if datastore.IsCredentialError(err) {
			return t, nil, badRequest("%v", err)
		}
		if err != nil {
			return t, nil, err
		}
	}
	return t, cred, nil
}
