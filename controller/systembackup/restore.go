package systembackup

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/backupverify"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

// keptSettings are not restored: the backup target the restore reads
// from, which the cluster already has, and what guards this cluster
// against what it downloads and pulls, which an archive read from a
// target (trusted by nothing) must not loosen: the backing image
// download ranges (an archive could open the guard to the cluster's own
// addresses) and the registry secret.
var keptSettings = map[types.SettingName]bool{
	types.SettingNameBackupTarget:                      true,
	types.SettingNameBackupTargetCredentialSecret:      true,
	types.SettingNameBackupstorePollInterval:           true,
	types.SettingNameBackingImageDownloadAllowedRanges: true,
	types.SettingNameBackingImageDownloadDeniedRanges:  true,
	types.SettingNameRegistrySecret:                    true,
}

type applied struct {
	created, kept, settings, noBackup int
}

// restorePlan is every write a restore makes, decided and checked before
// the first.
type restorePlan struct {
	settings []*longhorn.Setting
	targets  []*longhorn.BackupTarget
	jobs     []*longhorn.RecurringJob
	images   []*longhorn.BackingImage
	volumes  []*longhorn.Volume
	pvs      []*corev1.PersistentVolume
	pvcs     []*corev1.PersistentVolumeClaim
	kept     int
	noBackup []string
	scratch  []string
}

// archivedScratchVolume tells an archived drill's scratch volume: its
// label, and the name the drill gives the scratch volume of the backup
// the label names (an archive keeps no owner reference to tell it by).
func archivedScratchVolume(v *longhorn.Volume) bool {
	return types.IsBackupVerifyScratch(v.Labels) && v.Name == backupverify.ScratchVolumeName(v.Labels[types.LabelBackupVerifyScratch])
}

// plan decides what a restore writes: each object the cluster lacks,
// and each setting whose value differs (but the backup target's). An
// archived object that could not be created as it is (a setting's value
// this manager refuses, a recurring job breaking a rule) is an error
// naming it, and nothing is written.
func (c *RestoreController) plan(ctx context.Context, in *systembackup.Contents, backupURL func(volume, backup string) string) (*restorePlan, error) {
	p := &restorePlan{}
	exists := func(err error) (bool, error) {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	}
	var errs []error
	for _, s := range in.Settings {
		name := types.SettingName(s.Name)
		if keptSettings[name] {
			continue
		}
		if _, known := types.GetSettingDefinition(name); !known {
			continue // another version's setting: nothing here reads it
		}
		if err := types.ValidateSetting(name, s.Value); err != nil {
			errs = append(errs, fmt.Errorf("Setting %s: %w", s.Name, err))
			continue
		}
		cur, err := c.ds.GetSettingRO(name)
		if ok, err := exists(err); err != nil {
			return nil, err
		} else if !ok || cur.Value == s.Value {
			continue // the manager makes every setting it knows at start
		}
		upd := cur.DeepCopy()
		upd.Value = s.Value
		p.settings = append(p.settings, upd)
	}
	targets, err := c.ds.ListTargets()
	if err != nil {
		return nil, err
	}
	made, kept, err := restoredTargets(targets, func(name string) (bool, error) { return exists(getErr(c.ds.GetBackupTargetRO(name))) }, in.BackupTargets)
	if err != nil {
		return nil, err
	}
	p.targets, p.kept = made, p.kept+kept
	for i := range in.RecurringJobs {
		j := &in.RecurringJobs[i]
		ok, err := exists(getErr(c.ds.GetRecurringJobRO(j.Name)))
		if err != nil {
			return nil, err
		}
		if ok {
			p.kept++
			continue
		}
		job := &longhorn.RecurringJob{ObjectMeta: restored(j.ObjectMeta), Spec: j.Spec}
		if err := c.ds.ValidateRecurringJob(ctx, job, c.now()); err != nil {
			errs = append(errs, fmt.Errorf("RecurringJob %s: %w", j.Name, err))
			continue
		}
		p.jobs = append(p.jobs, job)
	}
	for i := range in.BackingImages {
		bi := &in.BackingImages[i]
		ok, err := exists(getErr(c.ds.GetBackingImageRO(bi.Name)))
		if err != nil {
			return nil, err
		}
		if ok {
			p.kept++
			continue
		}
		p.images = append(p.images, &longhorn.BackingImage{ObjectMeta: restored(bi.ObjectMeta), Spec: *bi.Spec.DeepCopy()})
	}
	for i := range in.Volumes {
		v := &in.Volumes[i]
		if archivedScratchVolume(v) {
			// An archive made before system backups left them out may
			// hold a drill's scratch volume: made again, it would be owned
			// by no Backup and never swept.
			p.scratch = append(p.scratch, v.Name)
			continue
		}
		ok, err := exists(getErr(c.ds.GetVolumeRO(v.Name)))
		if err != nil {
			return nil, err
		}
		if ok {
			p.kept++
			continue
		}
		if v.Status.LastBackup == "" {
			// Without a backup the volume would come back empty, as if
			// its data were restored: it is left out, and said.
			p.noBackup = append(p.noBackup, v.Name)
			continue
		}
		nv := &longhorn.Volume{ObjectMeta: restored(v.ObjectMeta), Spec: *v.Spec.DeepCopy()}
		nv.Spec.NodeID, nv.Spec.MigrationNodeID, nv.Spec.LastAttachedBy, nv.Spec.DataSource = "", "", "", ""
		nv.Spec.FromBackup = backupURL(v.Name, v.Status.LastBackup)
		p.volumes = append(p.volumes, nv)
	}
	restoredVolumes := map[string]bool{}
	for _, v := range p.volumes {
		restoredVolumes[v.Name] = true
	}
	restoredPVs := map[string]bool{}
	for i := range in.PersistentVolumes {
		pv := &in.PersistentVolumes[i]
		// Only the PV of a volume this restore makes: one of a volume
		// left as it was is that volume's business.
		if !restoredVolumes[pv.Spec.CSI.VolumeHandle] {
			continue
		}
		ok, err := exists(getErr(c.ds.GetPersistentVolume(ctx, pv.Name)))
		if err != nil {
			return nil, err
		}
		if ok {
			p.kept++
			continue
		}
		restoredPVs[pv.Name] = true
		npv := &corev1.PersistentVolume{ObjectMeta: withoutBinding(restored(pv.ObjectMeta)), Spec: *pv.Spec.DeepCopy()}
		if ref := npv.Spec.ClaimRef; ref != nil {
			// The claim of this cluster has another UID.
			npv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ref.Namespace, Name: ref.Name}
		}
		p.pvs = append(p.pvs, npv)
	}
	for i := range in.PersistentVolumeClaims {
		pvc := &in.PersistentVolumeClaims[i]
		if !restoredPVs[pvc.Spec.VolumeName] {
			continue
		}
		ok, err := exists(getErr(c.ds.GetPersistentVolumeClaim(ctx, pvc.Namespace, pvc.Name)))
		if err != nil {
			return nil, err
		}
		if ok {
			p.kept++
			continue
		}
		m := withoutBinding(restored(pvc.ObjectMeta))
		m.Namespace = pvc.Namespace
		p.pvcs = append(p.pvcs, &corev1.PersistentVolumeClaim{ObjectMeta: m, Spec: claimSpec(pvc.Spec)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

func getErr[T any](_ T, err error) error { return err }

// restored is the metadata an object is made again with.
func restored(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
}

// apply plans the restore, checks that user (who asked for it) may make
// each of its writes, then makes them: backup targets,
// settings, recurring jobs, backing images, volumes. An object made
// meanwhile by another hand is left as it is.
func (c *RestoreController) apply(ctx context.Context, user authenticationv1.UserInfo, in *systembackup.Contents, backupURL func(volume, backup string) string, log *logrus.Entry) (applied, error) {
	p, err := c.plan(ctx, in, backupURL)
	if err != nil {
		return applied{}, &planError{err}
	}
	if err := c.checkRights(ctx, user, p); err != nil {
		return applied{}, err
	}
	res := applied{kept: p.kept, settings: len(p.settings), noBackup: len(p.noBackup)}
	for _, name := range p.noBackup {
		log.WithField("volume", name).Warn("The system backup holds no backup of this volume: it is not restored")
	}
	for _, name := range p.scratch {
		log.WithFields(logrus.Fields{"volume": name, "reason": "a backup drill's scratch volume"}).Info("Not restoring a backup drill's scratch volume")
	}
	created := func(kind, name string, err error) error {
		switch {
		case apierrors.IsAlreadyExists(err):
			res.kept++
			return nil
		case err != nil:
			return fmt.Errorf("%s %s: %w", kind, name, err)
		}
		res.created++
		log.WithFields(logrus.Fields{"kind": kind, "name": name}).Info("Restored")
		return nil
	}
	for _, bt := range p.targets {
		if err := created("BackupTarget", bt.Name, getErr(c.ds.CreateBackupTarget(ctx, bt))); err != nil {
			return res, err
		}
	}
	for _, s := range p.settings {
		if _, err := c.ds.UpdateSetting(ctx, s); err != nil {
			return res, fmt.Errorf("Setting %s: %w", s.Name, err)
		}
		log.WithFields(logrus.Fields{"setting": s.Name, "value": s.Value}).Info("Restored the setting's value")
	}
	for _, j := range p.jobs {
		if err := created("RecurringJob", j.Name, getErr(c.ds.CreateRecurringJob(ctx, j))); err != nil {
			return res, err
		}
	}
	for _, bi := range p.images {
		if err := created("BackingImage", bi.Name, getErr(c.ds.CreateBackingImage(ctx, bi))); err != nil {
			return res, err
		}
	}
	for _, v := range p.volumes {
		if err := created("Volume", v.Name, getErr(c.ds.CreateVolume(ctx, v))); err != nil {
			return res, err
		}
	}
	for _, pv := range p.pvs {
		if err := created("PersistentVolume", pv.Name, getErr(c.ds.CreatePersistentVolume(ctx, pv))); err != nil {
			return res, err
		}
	}
	for _, pvc := range p.pvcs {
		_, err := c.ds.CreatePersistentVolumeClaim(ctx, pvc)
		if apierrors.IsNotFound(err) {
			// Its namespace is not there: the claim is the workload's,
			// made with it; the PV waits for it.
			log.WithFields(logrus.Fields{"claim": pvc.Namespace + "/" + pvc.Name}).Warn("The claim's namespace does not exist: the claim is not restored")
			continue
		}
		if err := created("PersistentVolumeClaim", pvc.Namespace+"/"+pvc.Name, err); err != nil {
			return res, err
		}
	}
	return res, nil
}

// planError is an archive that cannot be restored as it is.
type planError struct{ err error }

func (e *planError) Error() string { return e.err.Error() }
func (e *planError) Unwrap() error { return e.err }

// restoredTargets are the archive's BackupTargets a restore makes, and
// how many it keeps as they are: not one whose name the cluster has, nor
// one at a place (backupstore.TargetLocation) where another target keeps
// its backups, one of the cluster's or one restored before it: two
// targets at one place would each show, and delete, the other's backups.
func restoredTargets(have []datastore.Target, named func(string) (bool, error), archive []longhorn.BackupTarget) ([]*longhorn.BackupTarget, int, error) {
	var made []*longhorn.BackupTarget
	kept := 0
	have = slices.Clone(have)
	for i := range archive {
		bt := &archive[i]
		ok, err := named(bt.Name)
		if err != nil {
			return nil, 0, err
		}
		if ok || sharesURL(have, bt.Spec.BackupTargetURL) {
			kept++
			continue
		}
		made = append(made, &longhorn.BackupTarget{ObjectMeta: restored(bt.ObjectMeta), Spec: bt.Spec})
		have = append(have, datastore.Target{Name: bt.Name, URL: bt.Spec.BackupTargetURL})
	}
	return made, kept, nil
}

// sharesURL tells whether a target in targets keeps its backups where
// url does.
func sharesURL(targets []datastore.Target, url string) bool {
	for _, t := range targets {
		if url != "" && t.URL != "" && backupstore.SameTarget(t.URL, url) {
			return true
		}
	}
	return false
}
