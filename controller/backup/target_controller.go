package backup

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// backupTargetPollPeriod is how often the backup target is read again.
const backupTargetPollPeriod = 30 * time.Second

// TargetController mirrors the backup target into BackupVolume and
// Backup objects: what the target holds (Completed), and what engines are
// backing up (InProgress, Error). Deleting a Backup object deletes the
// backup from the target. One node does this: the first Ready node by
// name, so the objects have one writer.
//
// A target it cannot read (a missing or refused credential, a missing
// bucket, an unreachable server) is said in every BackupVolume's
// messages and in a Warning event on the setting to fix:
// backup-target-credential-secret when the credential is at fault,
// backup-target otherwise.
//
// Ownership: the first Ready node by name. It differs from kit.Ownership
// because the target has no object of its own to record an owner in (it
// is a setting), and every node can compute this from the Node objects.
type TargetController struct {
	*kit.Base
	ds       *datastore.DataStore
	nodeID   string
	recorder record.EventRecorder
	health   targetHealth
}

// BackupVolumeMessageTarget is the key of a BackupVolume's message saying
// why the backup target cannot be read.
const BackupVolumeMessageTarget = "backupTarget"

// NewTargetController wires the controller to the informers that
// can change what it writes.
func NewTargetController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, recorder record.EventRecorder) *TargetController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &TargetController{ds: ds, nodeID: nodeID, recorder: recorder}
	c.Base = kit.NewBase("longhorn-backup-target", logger, metrics, c.sync,
		lh.Backups().Informer().HasSynced, lh.BackupVolumes().Informer().HasSynced, lh.Engines().Informer().HasSynced, lh.Settings().Informer().HasSynced)
	poke := func(any) { c.Queue.Add(c.key()) }
	handler := cache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, cur any) { poke(cur) }, DeleteFunc: poke}
	lh.Engines().Informer().AddEventHandler(handler)
	lh.Backups().Informer().AddEventHandler(handler)
	lh.Settings().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s, ok := obj.(*longhorn.Setting)
			return ok && (s.Name == string(types.SettingNameBackupTarget) || s.Name == string(types.SettingNameBackupTargetCredentialSecret))
		},
		Handler: handler,
	})
	c.Queue.Add(c.key())
	return c
}

func (c *TargetController) key() string { return c.ds.Namespace() + "/backup-target" }

// leader reports whether this node is the first Ready node by name.
func (c *TargetController) leader() bool {
	nodes, err := c.ds.ListNodesRO()
	if err != nil {
		return false
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if datastore.IsNodeReady(n) {
			return n.Name == c.nodeID
		}
	}
	return false
}

func (c *TargetController) sync(ctx context.Context, key string) (kit.Result, error) {
	// The target is polled: what other clusters write to it comes in
	// with no event here.
	again := kit.Result{RequeueAfter: backupTargetPollPeriod}
	if !c.leader() {
		c.notPolling()
		return again, nil
	}
	target, err := c.ds.GetSettingValue(types.SettingNameBackupTarget)
	if err != nil || target == "" {
		c.notPolling()
		return again, err
	}
	err = c.syncTarget(ctx, target)
	var te *targetError
	if errors.As(err, &te) {
		c.reportUnavailable(ctx, te)
	}
	c.polled(target, te == nil, time.Now())
	return again, err
}

// targetError is a backup target that cannot be opened or read.
type targetError struct{ err error }

func (e *targetError) Error() string { return e.err.Error() }
func (e *targetError) Unwrap() error { return e.err }

// reportUnavailable says why the target cannot be read: a Warning event
// on the setting to fix (the recorder folds the repeats of each poll into
// one event with a count) and a message on every BackupVolume.
func (c *TargetController) reportUnavailable(ctx context.Context, te *targetError) {
	setting := types.SettingNameBackupTarget
	if datastore.IsCredentialError(te) || backupstore.IsCredentialError(te) {
		setting = types.SettingNameBackupTargetCredentialSecret
	}
	if s, err := c.ds.GetSettingRO(setting); err == nil && c.recorder != nil {
		c.recorder.Event(s, corev1.EventTypeWarning, "BackupTargetUnavailable", te.Error())
	}
	msg := "the backup target cannot be read: " + te.Error()
	bvs, err := c.ds.ListBackupVolumesRO()
	if err != nil {
		return
	}
	for _, bv := range bvs {
		if bv.Status.Messages[BackupVolumeMessageTarget] == msg {
			continue
		}
		updated := bv.DeepCopy()
		if updated.Status.Messages == nil {
			updated.Status.Messages = map[string]string{}
		}
		updated.Status.Messages[BackupVolumeMessageTarget] = msg
		if _, err := c.ds.UpdateBackupVolumeStatus(ctx, updated); err != nil && !apierrors.IsNotFound(err) {
			c.Logger.WithError(err).WithField("backupVolume", bv.Name).Warn("Cannot record the backup target's error")
		}
	}
}

func (c *TargetController) syncTarget(ctx context.Context, target string) error {
	var cred map[string]string
	if backupstore.UsesCredential(target) {
		var err error
		if cred, err = c.ds.GetBackupTargetCredential(ctx); err != nil {
			return &targetError{err}
		}
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return &targetError{err}
	}
	backups, err := c.ds.ListBackupsRO("")
	if err != nil {
		return err
	}
	deleteErr := c.finishDeletions(ctx, store, backups)

	// What engines report is mirrored even when the target cannot be read
	// (a backup failing for that reason shows its error), but nothing is
	// forgotten then: an unreachable target must not empty the lists.
	desired, volumes, storeErr := c.desiredState(store)
	existing := map[string]*longhorn.Backup{}
	for _, b := range backups {
		existing[b.Name] = b
	}
	for _, k := range desired.keys() {
		want := desired[k]
		live := existing[k.name]
		if live != nil && datastore.BackupVolumeName(live) != k.volume {
			// Backup objects are named by the backup alone, and this
			// name is another volume's: a copy made by hand, or another
			// cluster's. The object keeps mirroring the volume it was
			// made for; this one is said on its BackupVolume.
			volumes.note(k.volume, BackupVolumeMessageNameTaken, fmt.Sprintf("backup %s is not shown: a Backup object of that name stands for volume %s's backup", k.name, datastore.BackupVolumeName(live)))
			continue
		}
		synced, err := c.syncBackup(ctx, live, want)
		if err != nil {
			return err
		}
		if synced != nil {
			existing[k.name] = synced
		}
	}
	if storeErr != nil {
		return &targetError{storeErr}
	}
	for name, b := range existing {
		if _, ok := desired[backupKey{datastore.BackupVolumeName(b), name}]; ok || b.DeletionTimestamp != nil {
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
	if err := c.syncBackupVolumes(ctx, volumes); err != nil {
		return err
	}
	return deleteErr
}

// backupKey is a backup in the target: two volumes may hold backups of
// the same name.
type backupKey struct{ volume, name string }

// desiredBackups are the Backup objects wanted, by volume and name.
type desiredBackups map[backupKey]*longhorn.Backup

// keys are the backups by name, then volume: of two volumes holding a
// backup of one name, the first by volume gets the object when neither
// has it yet.
func (d desiredBackups) keys() []backupKey {
	keys := make([]backupKey, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].name != keys[j].name {
			return keys[i].name < keys[j].name
		}
		return keys[i].volume < keys[j].volume
	})
	return keys
}

// desiredState is every backup the target holds or an engine runs, and
// every volume the target holds.
func (c *TargetController) desiredState(store *backupstore.Store) (desiredBackups, volumeStates, error) {
	desired := desiredBackups{}
	engines, err := c.ds.ListEnginesRO()
	if err != nil {
		return desired, volumeStates{}, err
	}
	for _, e := range engines {
		for name, st := range e.Status.BackupStatus {
			if st.State == backupStateCompleted {
				continue // the target lists it
			}
			desired[backupKey{e.Spec.VolumeName, name}] = backupObject(name, e.Spec.VolumeName, longhorn.BackupStatus{
				State: longhorn.BackupState(st.State), Progress: st.Progress, SnapshotName: st.SnapshotName, Error: st.Error, VolumeName: e.Spec.VolumeName,
			})
		}
	}
	listing, err := store.Scan()
	if err != nil {
		return desired, volumeStates{}, fmt.Errorf("read the backup target: %w", err)
	}
	for volume, list := range listing.Backups {
		for _, b := range list {
			desired[backupKey{volume, b.Name}] = backupObject(b.Name, volume, longhorn.BackupStatus{
				State: longhorn.BackupStateCompleted, Progress: 100, URL: store.URL(volume, b.Name),
				SnapshotName: b.SnapshotName, SnapshotCreatedAt: b.SnapshotCreatedAt, BackupCreatedAt: b.CreatedAt,
				Size: strconv.FormatInt(b.Size, 10), Labels: b.Labels, VolumeName: volume, VolumeSize: strconv.FormatInt(b.VolumeSize, 10),
				VolumeBackingImageName: b.BackingImageName, BackupMode: backupMode(b.Mode),
				NewlyUploadedDataSize: strconv.FormatInt(b.NewlyUploaded, 10), ReUploadedDataSize: strconv.FormatInt(b.ReUploaded, 10),
			})
		}
	}
	// A config that cannot be used shows as a Backup in Error, so a user
	// sees it and can delete it; nothing else reads it.
	volumes := volumeStates{infos: listing.Volumes, invalid: map[string]string{}}
	for _, v := range listing.RecordMissing {
		volumes.note(v, BackupVolumeMessageRecordMissing, "the volume's record (backupstore/volumes/"+v+"/volume.cfg) is missing from the backup target: its backups are listed from their own configs, and the volume's next backup writes the record again")
	}
	for _, bad := range listing.Invalid {
		if bad.Backup == "" {
			volumes.invalid[bad.Volume] = bad.Err.Error()
			continue
		}
		desired[backupKey{bad.Volume, bad.Backup}] = backupObject(bad.Backup, bad.Volume, longhorn.BackupStatus{
			State: longhorn.BackupStateError, VolumeName: bad.Volume, URL: store.URL(bad.Volume, bad.Backup), Error: bad.Err.Error(),
		})
	}
	return desired, volumes, nil
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

// volumeStates are the volumes a target holds: their records, why a
// record that cannot be used cannot, and what else their BackupVolumes
// say (by volume name, then message key).
type volumeStates struct {
	infos    []backupstore.VolumeInfo
	invalid  map[string]string
	messages map[string]map[string]string
}

// note adds a message to a volume's BackupVolume; notes under one key
// are joined.
func (v *volumeStates) note(volume, key, msg string) {
	if v.messages == nil {
		v.messages = map[string]map[string]string{}
	}
	if v.messages[volume] == nil {
		v.messages[volume] = map[string]string{}
	}
	if prev := v.messages[volume][key]; prev != "" {
		msg = prev + "; " + msg
	}
	v.messages[volume][key] = msg
}

// Keys of BackupVolume messages besides BackupVolumeMessageTarget.
const (
	// BackupVolumeMessageRecordMissing: the volume's volume.cfg is
	// missing from the target.
	BackupVolumeMessageRecordMissing = "volumeRecordMissing"
	// BackupVolumeMessageNameTaken: a backup of this volume has the name
	// of another volume's, whose Backup object has it.
	BackupVolumeMessageNameTaken = "backupNameTaken"
)

func backupObject(name, volume string, status longhorn.BackupStatus) *longhorn.Backup {
	return &longhorn.Backup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelBackupVolume: volume}, Finalizers: []string{types.LonghornFinalizer}},
		Spec:       longhorn.BackupSpec{SnapshotName: status.SnapshotName},
		Status:     status,
	}
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

func (c *TargetController) syncBackupVolumes(ctx context.Context, volumes volumeStates) error {
	live, err := c.ds.ListBackupVolumesRO()
	if err != nil {
		return err
	}
	have := map[string]*longhorn.BackupVolume{}
	for _, bv := range live {
		have[bv.Name] = bv
	}
	infos := volumes.infos
	for name := range volumes.invalid {
		infos = append(infos, backupstore.VolumeInfo{Name: name})
	}
	for _, v := range infos {
		bv := have[v.Name]
		delete(have, v.Name)
		if bv == nil {
			created, err := c.ds.CreateBackupVolume(ctx, &longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: v.Name}})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			if err != nil {
				continue
			}
			bv = created
		}
		status := longhorn.BackupVolumeStatus{
			OwnerID: c.nodeID, Size: strconv.FormatInt(v.Size, 10), CreatedAt: v.CreatedAt,
			LastBackupName: v.LastBackupName, LastBackupAt: v.LastBackupAt, LastSyncedAt: bv.Status.LastSyncedAt,
			LastModificationTime: bv.Status.LastModificationTime,
		}
		for key, msg := range volumes.messages[v.Name] {
			if status.Messages == nil {
				status.Messages = map[string]string{}
			}
			status.Messages[key] = msg
		}
		if msg, ok := volumes.invalid[v.Name]; ok {
			if status.Messages == nil {
				status.Messages = map[string]string{}
			}
			status.Messages["Error"] = msg
		}
		if !kit.StatusChanged(status, bv.Status) {
			continue
		}
		status.LastSyncedAt = metav1.Now()
		updated := bv.DeepCopy()
		updated.Status = status
		if _, err := c.ds.UpdateBackupVolumeStatus(ctx, updated); err != nil {
			return err
		}
	}
	for name := range have {
		if err := c.ds.DeleteBackupVolume(ctx, name); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
