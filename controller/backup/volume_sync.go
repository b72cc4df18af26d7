package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// world is what the cluster holds that a sync of one target reads, from
// the cache.
type world struct {
	target        string                            // the target's name
	backups       map[string]*longhorn.Backup       // by name, of every target
	backupVolumes map[string]*longhorn.BackupVolume // of this target, by volume
	// engineBackups are the backups engines report to this target and
	// have not completed, by volume and backup name.
	engineBackups map[string]map[string]*longhorn.EngineBackupStatus
}

// inTarget reports whether b is in the world's target.
func (w *world) inTarget(b *longhorn.Backup) bool { return datastore.BackupTargetOf(b) == w.target }

func (c *TargetController) loadWorld(t datastore.Target) (*world, error) {
	w := &world{target: t.Name, backups: map[string]*longhorn.Backup{}, backupVolumes: map[string]*longhorn.BackupVolume{}, engineBackups: map[string]map[string]*longhorn.EngineBackupStatus{}}
	backups, err := c.ds.ListBackupsRO("")
	if err != nil {
		return nil, err
	}
	for _, b := range backups {
		w.backups[b.Name] = b
	}
	bvs, err := c.ds.ListBackupVolumesRO()
	if err != nil {
		return nil, err
	}
	for _, bv := range bvs {
		if datastore.BackupVolumeTarget(bv) != t.Name {
			continue
		}
		// Two objects for one volume (one made by hand): one named as
		// this manager names it wins, so the choice is stable.
		vol := datastore.BackupVolumeVolume(bv)
		if prev := w.backupVolumes[vol]; prev == nil || slices.Contains(datastore.BackupVolumeObjectNames(vol, t.Name), bv.Name) {
			w.backupVolumes[vol] = bv
		}
	}
	engines, err := c.ds.ListEnginesRO()
	if err != nil {
		return nil, err
	}
	for _, e := range engines {
		for name, st := range e.Status.BackupStatus {
			if st == nil || st.State == backupStateCompleted {
				continue // the target lists it
			}
			if c.engineBackupTarget(e, st) != t.Name {
				continue
			}
			if w.engineBackups[e.Spec.VolumeName] == nil {
				w.engineBackups[e.Spec.VolumeName] = map[string]*longhorn.EngineBackupStatus{}
			}
			w.engineBackups[e.Spec.VolumeName][name] = st
		}
	}
	return w, nil
}

// deleting are the Backup objects a user deleted whose backups are still
// to be deleted: of one volume, or of every volume when all.
func (w *world) deleting(volume string, all bool) []*longhorn.Backup {
	var out []*longhorn.Backup
	for _, b := range w.backups {
		if b.DeletionTimestamp != nil && kit.HasFinalizer(b) && w.inTarget(b) && (all || backupVolumeOf(b) == volume) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// backupsOf are a volume's Backup objects in the world's target, by name.
func (w *world) backupsOf(volume string) []*longhorn.Backup {
	var out []*longhorn.Backup
	for _, b := range w.backups {
		if backupVolumeOf(b) == volume && w.inTarget(b) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// volumeDesired is what one volume's objects should say: the Backup
// objects by name, and the BackupVolume (nil when the target holds
// nothing of the volume).
type volumeDesired struct {
	backups map[string]*longhorn.Backup
	volume  *longhorn.BackupVolumeStatus
}

// desireVolume is what a volume's objects should say, given what its
// engines report of running backups and what the target holds (listing,
// nil when nothing). url names a backup of the volume.
func desireVolume(target, volume string, engines map[string]*longhorn.EngineBackupStatus, listing *backupstore.VolumeListing, url func(volume, backup string) string) volumeDesired {
	d := volumeDesired{backups: engineObjects(target, volume, engines)}
	if listing == nil {
		return d
	}
	for _, b := range listing.Backups {
		d.backups[b.Name] = backupObject(b.Name, volume, target, longhorn.BackupStatus{
			State: longhorn.BackupStateCompleted, Progress: 100, URL: url(volume, b.Name),
			SnapshotName: b.SnapshotName, SnapshotCreatedAt: b.SnapshotCreatedAt, BackupCreatedAt: b.CreatedAt,
			Size: strconv.FormatInt(b.Size, 10), Labels: b.Labels, VolumeName: volume, VolumeSize: strconv.FormatInt(b.VolumeSize, 10),
			VolumeBackingImageName: b.BackingImageName, BackupMode: backupMode(b.Mode),
			NewlyUploadedDataSize: strconv.FormatInt(b.NewlyUploaded, 10), ReUploadedDataSize: strconv.FormatInt(b.ReUploaded, 10),
		})
	}
	v := listing.Volume
	status := &longhorn.BackupVolumeStatus{Size: strconv.FormatInt(v.Size, 10), CreatedAt: v.CreatedAt, LastBackupName: v.LastBackupName, LastBackupAt: v.LastBackupAt}
	note := func(key, msg string) {
		if status.Messages == nil {
			status.Messages = map[string]string{}
		}
		status.Messages[key] = msg
	}
	if listing.RecordMissing {
		note(BackupVolumeMessageRecordMissing, "the volume's record (backupstore/volumes/"+volume+"/volume.cfg) is missing from the backup target: its backups are listed from their own configs, and the volume's next backup writes the record again")
	}
	// A config that cannot be used shows as a Backup in Error, so a user
	// sees it and can delete it; nothing else reads it.
	for _, bad := range listing.Invalid {
		if bad.Backup == "" {
			note("Error", bad.Err.Error())
			continue
		}
		d.backups[bad.Backup] = backupObject(bad.Backup, volume, target, longhorn.BackupStatus{
			State: longhorn.BackupStateError, VolumeName: volume, URL: url(volume, bad.Backup), Error: bad.Err.Error(),
		})
	}
	d.volume = status
	return d
}

// engineObjects are the Backup objects of the backups engines run.
func engineObjects(target, volume string, engines map[string]*longhorn.EngineBackupStatus) map[string]*longhorn.Backup {
	out := map[string]*longhorn.Backup{}
	for name, st := range engines {
		out[name] = backupObject(name, volume, target, longhorn.BackupStatus{
			State: longhorn.BackupState(st.State), Progress: st.Progress, SnapshotName: st.SnapshotName, Error: st.Error, VolumeName: volume,
		})
	}
	return out
}

// syncVolume brings one volume's Backup objects and BackupVolume in line
// with what its engines report and what the target holds (listing, nil
// when nothing: read without error).
func (c *TargetController) syncVolume(ctx context.Context, store *backupstore.Store, w *world, volume string, listing *backupstore.VolumeListing) error {
	d := desireVolume(w.target, volume, w.engineBackups[volume], listing, store.URL)
	if d.volume != nil && w.backupVolumes[volume] == nil {
		// The volume's first backup in the target: its BackupVolume is
		// made first, so that no Backup shows Completed before the
		// backup volume it is listed under (backupList and the jobs
		// find it by it) exists. Its status follows the Backups.
		created, err := c.createBackupVolume(ctx, w.target, volume)
		if err != nil {
			return err
		}
		if created != nil {
			w.backupVolumes[volume] = created
		}
	}
	taken, err := c.applyBackups(ctx, w, volume, d.backups)
	if err != nil {
		return err
	}
	for _, b := range w.backupsOf(volume) {
		if _, ok := d.backups[b.Name]; ok || b.DeletionTimestamp != nil {
			continue
		}
		switch b.Status.State {
		case longhorn.BackupStateInProgress:
			// No engine runs it any more (the manager restarted or the
			// volume was detached) and the target does not hold it: it
			// did not complete, and says so rather than vanish.
			if err := c.markInterrupted(ctx, b); err != nil {
				return err
			}
		case longhorn.BackupStateError:
			// A failed backup stays until the user deletes it, so the
			// failure is seen.
		default:
			// Gone from the target: the object goes too, and nothing is
			// deleted from the target for it.
			if err := c.forget(ctx, b); err != nil {
				return err
			}
		}
	}
	if d.volume != nil && taken != "" {
		if d.volume.Messages == nil {
			d.volume.Messages = map[string]string{}
		}
		d.volume.Messages[BackupVolumeMessageNameTaken] = taken
	}
	return c.syncBackupVolume(ctx, w.target, w.backupVolumes[volume], volume, d.volume)
}

// applyBackups creates or updates the Backup objects wanted for volume.
// It returns what the volume's BackupVolume says of backups whose names
// another volume's objects have.
func (c *TargetController) applyBackups(ctx context.Context, w *world, volume string, want map[string]*longhorn.Backup) (taken string, err error) {
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		live := w.backups[name]
		if live != nil && (backupVolumeOf(live) != volume || !w.inTarget(live)) {
			// Backup objects are named by the backup alone, and this
			// name is another volume's, or in another target: a copy
			// made by hand, or another cluster's. The object keeps
			// mirroring the backup it was made for; this one is said on
			// its BackupVolume.
			if taken != "" {
				taken += "; "
			}
			taken += fmt.Sprintf("backup %s is not shown: a Backup object of that name stands for volume %s's backup in backup target %s",
				name, backupVolumeOf(live), datastore.BackupTargetOf(live))
			continue
		}
		synced, err := c.syncBackup(ctx, live, want[name])
		if err != nil {
			return "", err
		}
		if synced != nil {
			w.backups[name] = synced
		}
	}
	return taken, nil
}

// syncMirror copies what one volume's engines report of their running
// backups into Backup objects, reading nothing from the target.
// Each target's backups are mirrored by that target's owner only.
func (c *TargetController) syncMirror(ctx context.Context, volume string) error {
	targets, err := c.ds.ListTargets()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range targets {
		if _, owned, err := c.ownedTarget(ctx, t.Name); err != nil || !owned {
			if err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
			continue
		}
		w, err := c.loadWorld(t)
		if err != nil {
			return err
		}
		errs = append(errs, c.mirrorEngines(ctx, w, volume))
	}
	return errors.Join(errs...)
}

// mirrorEngines copies what engines report of their running backups into
// Backup objects, of one volume or of all when volume is empty. Nothing
// is forgotten or marked interrupted: that needs the target's word.
func (c *TargetController) mirrorEngines(ctx context.Context, w *world, volume string) error {
	for vol, states := range w.engineBackups {
		if volume != "" && vol != volume {
			continue
		}
		if _, err := c.applyBackups(ctx, w, vol, engineObjects(w.target, vol, states)); err != nil {
			return err
		}
	}
	return nil
}

// syncBackup creates or updates the object of one backup, and returns it
// (nil when the cache was behind and another sync will).
func (c *TargetController) syncBackup(ctx context.Context, live, want *longhorn.Backup) (*longhorn.Backup, error) {
	if live == nil {
		created, err := c.ds.CreateBackup(ctx, want)
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("create Backup %s: %w", want.Name, err)
		}
		live = created
	}
	if live.DeletionTimestamp != nil {
		return live, nil
	}
	if live.Labels[types.LabelBackupTarget] == "" {
		// Made before there were several targets: it is default's, and
		// says so as new objects do.
		labelled := live.DeepCopy()
		if labelled.Labels == nil {
			labelled.Labels = map[string]string{}
		}
		labelled.Labels[types.LabelBackupTarget] = want.Labels[types.LabelBackupTarget]
		var err error
		if live, err = c.ds.UpdateBackup(ctx, labelled); err != nil {
			return nil, fmt.Errorf("label Backup %s with its backup target: %w", want.Name, err)
		}
	}
	status := want.Status
	status.OwnerID = c.nodeID
	status.LastSyncedAt = live.Status.LastSyncedAt
	// The last drill's result is the backup verify controller's, not the
	// target's: kept as it is.
	status.Verification = live.Status.Verification
	if !kit.StatusChanged(status, live.Status) {
		return live, nil
	}
	status.LastSyncedAt = metav1.Now()
	updated := live.DeepCopy()
	updated.Status = status
	return c.ds.UpdateBackupStatus(ctx, updated)
}

// markInterrupted puts a backup that no engine runs and the target lacks
// in Error.
func (c *TargetController) markInterrupted(ctx context.Context, b *longhorn.Backup) error {
	updated := b.DeepCopy()
	updated.Status.State = longhorn.BackupStateError
	updated.Status.Error = "interrupted: the engine running this backup stopped (a manager restart or the volume detached) before it completed; nothing of it is visible in the backup target, take a new backup"
	updated.Status.LastSyncedAt = metav1.Now()
	if _, err := c.ds.UpdateBackupStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	c.Logger.WithFields(logrus.Fields{"backup": b.Name, "volume": b.Status.VolumeName}).Warn("Backup interrupted: no engine runs it and the target does not hold it")
	return nil
}

const backupStateCompleted = "Completed"

// backupMode is a backup's mode as its record gives it; a record of an
// older manager, which has none, was incremental (or a first backup,
// which it did not tell apart).
func backupMode(recorded string) string {
	if recorded == "" {
		return backupstore.ModeIncremental
	}
	return recorded
}

func backupObject(name, volume, target string, status longhorn.BackupStatus) *longhorn.Backup {
	status.BackupTargetName = target
	return &longhorn.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelBackupVolume: volume, types.LabelBackupTarget: target}, Finalizers: []string{types.LonghornFinalizer}},
		Spec:       longhorn.BackupSpec{SnapshotName: status.SnapshotName},
		Status:     status,
	}
}

// Keys of BackupVolume messages besides BackupVolumeMessageTarget.
const (
	// BackupVolumeMessageRecordMissing: the volume's volume.cfg is
	// missing from the target.
	BackupVolumeMessageRecordMissing = "volumeRecordMissing"
	// BackupVolumeMessageNameTaken: a backup of this volume has the name
	// of another volume's, whose Backup object has it.
	BackupVolumeMessageNameTaken = "backupNameTaken"
	// BackupVolumeMessageDeletion: why a deletion of the whole volume
	// from the target has not finished.
	BackupVolumeMessageDeletion = "deletion"
)
