package api

import (
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
)

// BackupVerifyInput names the backup to drill; empty for the backup
// volume's newest Completed backup. Full asks for a full drill: the
// backup also restored into a scratch volume and its filesystem checked.
type BackupVerifyInput struct {
	Name string `json:"name"`
	Full *bool  `json:"full,omitempty"`
}

// backupVerify asks for a drill of a backup (backupVerify, a backup volume
// action): it sets the Backup's spec.verifyRequestedAt, and the backup
// verify controller makes the drill and records it in the Backup's
// status.verification, which the answer's verification shows once it is
// later than the request. A drill of the blocks asked for while one is
// pending is the same drill. A full one asked for while a drill of the
// blocks is pending is a new request, of a later time: the drill of the
// blocks may be running already, and its result answers only the request
// it ran for (datastore.VerificationAnswers).
func (s *Server) backupVerify(w http.ResponseWriter, r *http.Request, bvName string) error {
	var in BackupVerifyInput
	if r.ContentLength != 0 {
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
	}
	full := in.Full != nil && *in.Full
	if full {
		// A full drill restores the whole backup onto this node's disk
		// (a scratch volume the size of the backed-up one): a right of
		// its own beside backupVerify's, update on the subresource
		// backupvolumes/backupVerifyFull (or on the backup volume).
		if err := s.requireAccess(r, access{verb: "update", resource: "backupvolumes", name: bvName,
			orElse: &access{verb: "update", resource: "backupvolumes", subresource: "backupVerifyFull", name: bvName}}); err != nil {
			return err
		}
	}
	bv, err := s.ds.GetBackupVolumeRO(bvName)
	if apierrors.IsNotFound(err) {
		return notFound("backup volume %q not found", bvName)
	}
	if err != nil {
		return err
	}
	volume, target := datastore.BackupVolumeVolume(bv), datastore.BackupVolumeTarget(bv)
	backups, err := s.ds.ListBackupsInTarget(target, volume)
	if err != nil {
		return err
	}
	name := in.Name
	if name == "" {
		newest := datastore.NewestCompletedBackup(backups)
		if newest == nil {
			return &httpError{http.StatusConflict, "Conflict", "backup volume " + volume + " has no Completed backup to verify"}
		}
		name = newest.Name
	}
	b, err := s.ds.GetBackupRO(name)
	if apierrors.IsNotFound(err) || (err == nil && (datastore.BackupVolumeName(b) != volume || datastore.BackupTargetOf(b) != target)) {
		return notFound("name: backup %q of volume %q in backup target %q not found", name, volume, target)
	}
	if err != nil {
		return err
	}
	if b.Status.State != "Completed" {
		return &httpError{http.StatusConflict, "Conflict", "name: backup " + name + " is " + string(b.Status.State) + "; only a Completed backup can be verified"}
	}
	if due := datastore.VerifyDue(b); !due || (full && !b.Spec.VerifyFull) {
		err = datastore.RetryOnConflict(func() error {
			live, err := s.ds.GetBackupRO(name)
			if err != nil {
				return err
			}
			updated := live.DeepCopy()
			if datastore.VerifyDue(live) && (live.Spec.VerifyFull || !full) {
				b = live // the drill pending answers this request too
				return nil
			}
			// A drill pending of the blocks alone becomes full with a
			// new time: the controller may be drilling the blocks for
			// the old one, whose result must not answer this.
			updated.Spec.VerifyFull = full
			// Whole seconds, as the API server keeps times: a request
			// must compare later than the drill it follows, and than the
			// request it replaces.
			at := time.Now().Truncate(time.Second).Add(time.Second)
			if prev := live.Status.Verification; prev != nil && !at.After(prev.RequestedAt.Time) {
				at = prev.RequestedAt.Add(time.Second)
			}
			if pending := live.Spec.VerifyRequestedAt; !at.After(pending.Time) {
				at = pending.Add(time.Second)
			}
			updated.Spec.VerifyRequestedAt = metav1.NewTime(at)
			b, err = s.ds.UpdateBackup(r.Context(), updated)
			return err
		})
		if err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, toBackup(b))
	return nil
}

// fullAfterFailedDrill makes a backup to target full when a drill found
// a backup of the volume in that target damaged and no full backup has
// completed there since (datastore.NextBackupFull), so the damaged
// blocks stop being shared.
func (s *Server) fullAfterFailedDrill(volume, target string, in *SnapshotInput) error {
	if in.BackupMode == backupstore.ModeFull {
		return nil
	}
	v, err := s.ds.GetVolumeRO(volume)
	if apierrors.IsNotFound(err) {
		return nil // answered below, as before
	}
	if err != nil {
		return err
	}
	backups, err := s.ds.ListBackupsRO(volume)
	if err != nil {
		return err
	}
	if full, why := datastore.NextBackupFull(v, backups, target); full {
		logrus.WithFields(logrus.Fields{"volume": volume, "snapshot": in.Name, "backupTarget": target, "reason": why}).Info("Making the backup full: a drill found a backup of the volume in its target damaged")
		in.BackupMode = backupstore.ModeFull
	}
	return nil
}
