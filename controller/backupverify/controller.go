package backupverify

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	"github.com/cadence-storage/longhorn-manager/internal/rodevice"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Event reasons.
const (
	EventBackupVerified     = "BackupVerified"
	EventBackupVerifyFailed = "BackupVerifyFailed"
	EventBackupVerifyError  = "BackupVerifyError"
)

// Controller makes the drills Backup objects ask for.
type Controller struct {
	*kit.Base
	ds       *datastore.DataStore
	nodeID   string
	recorder record.EventRecorder
	now      func() time.Time
	// written keeps a sync retried before the informer brings back its
	// own status write (a failed volume write after it) from drilling
	// the backup again.
	written kit.Written

	// FullDrillTimeout bounds a full drill; ScratchDeviceRoot is the
	// folder of its read-only devices (swept at start).
	FullDrillTimeout  time.Duration
	ScratchDeviceRoot string
	// active is the scratch volume of the full drill running, if one is.
	mu     sync.Mutex
	active string
}

// NewController wires the controller to the Backup informer (a drill is
// asked for in a Backup's spec), the BackupTarget informer (a target's
// owner drills its backups: a new owner takes the drills asked for) and
// the Volume informer (a full drill's scratch volume that no drill runs
// on is deleted: the informer's first list, at start, brings those a
// crash left). dataDir holds the full drills' devices.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID, dataDir string, recorder record.EventRecorder) *Controller {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &Controller{ds: ds, nodeID: nodeID, recorder: recorder, now: time.Now,
		FullDrillTimeout: DefaultFullDrillTimeout, ScratchDeviceRoot: filepath.Join(dataDir, "backup-drill")}
	if abs, err := filepath.Abs(c.ScratchDeviceRoot); err == nil {
		c.ScratchDeviceRoot = abs // a loop device names its file absolute
	}
	c.Base = kit.NewBase("longhorn-backup-verify", logger, metrics, c.sync,
		lh.Backups().Informer().HasSynced, lh.Volumes().Informer().HasSynced, lh.Nodes().Informer().HasSynced, lh.Settings().Informer().HasSynced,
		lh.BackupTargets().Informer().HasSynced)
	lh.Backups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: c.enqueueDue, UpdateFunc: func(_, cur any) { c.enqueueDue(cur) }})
	lh.BackupTargets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(cur any) { c.targetOwnerChanged(nil, cur) },
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*longhorn.BackupTarget)
			c.targetOwnerChanged(o, cur)
		},
	})
	enqueueScratch := func(obj any) {
		if v, ok := obj.(*longhorn.Volume); ok && types.IsBackupVerifyScratch(v.Labels) {
			c.Queue.Add(scratchKey(v.Name))
		}
	}
	lh.Volumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueScratch, UpdateFunc: func(_, cur any) { enqueueScratch(cur) }})
	return c
}

// Run undoes the devices of full drills a crash cut short, then runs
// the controller.
func (c *Controller) Run(ctx context.Context, workers int) error {
	if swept := rodevice.Sweep(c.ScratchDeviceRoot); len(swept) > 0 {
		c.Logger.WithField("devices", swept).Info("Undid the read-only devices of full drills cut short")
	}
	return c.Base.Run(ctx, workers)
}

// enqueueDue queues a Backup whose drill was asked for and not made.
func (c *Controller) enqueueDue(obj any) {
	if b, ok := obj.(*longhorn.Backup); ok && datastore.VerifyDue(b) {
		if key, err := cache.MetaNamespaceKeyFunc(b); err == nil {
			c.Queue.Add(key)
		}
	}
}

// targetOwnerChanged queues the drills asked for of a target's backups
// when the target gets an owner or another one: the node that now owns
// it takes them (the node that went away left them undone).
func (c *Controller) targetOwnerChanged(old *longhorn.BackupTarget, obj any) {
	bt, ok := obj.(*longhorn.BackupTarget)
	if !ok || bt.Status.OwnerID == "" || (old != nil && old.Status.OwnerID == bt.Status.OwnerID) {
		return
	}
	list, err := c.ds.ListBackupsRO("")
	if err != nil {
		c.Logger.WithError(err).WithField("backupTarget", bt.Name).Warn("Cannot list the backups whose drills the target's new owner takes")
		return
	}
	for _, b := range list {
		if datastore.BackupTargetOf(b) == bt.Name {
			c.enqueueDue(b)
		}
	}
}

// drills reports whether this node makes b's drill: the owner of b's
// BackupTarget, the node that polls it. The backup target controller
// claims a target with kit.Ownership (status.ownerID) and another node
// takes it over when its owner's manager goes down, so one node drills a
// target's backups and the drills move with the polling. A target with
// no owner yet, or owned by a node that is down until another claims it,
// is drilled by none: the claim brings its backups back
// (targetOwnerChanged).
func (c *Controller) drills(b *longhorn.Backup) bool {
	bt, err := c.ds.GetBackupTargetRO(datastore.BackupTargetOf(b))
	if err != nil || bt.DeletionTimestamp != nil {
		return false
	}
	return bt.Status.OwnerID == c.nodeID
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	if scratch, ok := parseScratchKey(key); ok {
		return kit.Result{}, c.syncScratch(ctx, scratch)
	}
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, nil
	}
	b, err := c.ds.GetBackupRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if !datastore.VerifyDue(b) || b.DeletionTimestamp != nil || c.written.Stale(key, b.ResourceVersion) || !c.drills(b) {
		return kit.Result{}, nil
	}
	volume := datastore.BackupVolumeName(b)
	log := c.Logger.WithFields(logrus.Fields{"backup": b.Name, "volume": volume, "backupTarget": datastore.BackupTargetOf(b), "requestedAt": b.Spec.VerifyRequestedAt.UTC().Format(time.RFC3339)})
	var rec longhorn.BackupVerification
	if b.Status.State != longhorn.BackupStateCompleted {
		rec = longhorn.BackupVerification{Result: longhorn.BackupVerificationError,
			Message: fmt.Sprintf("only a Completed backup can be drilled; this one is %q", b.Status.State)}
	} else {
		log.WithField("full", b.Spec.VerifyFull).Info("Drilling the backup: reading every block back from the target")
		res, err := c.drill(ctx, datastore.BackupTargetOf(b), volume, b.Name, log)
		rec = verification(res, err)
		if b.Spec.VerifyFull && rec.Result == longhorn.BackupVerificationPassed {
			full, result, msg := c.fullDrill(ctx, b, log)
			rec = withFullDrill(rec, full, result, msg)
		}
	}
	// The request answered, as read when the drill began: a request made
	// full meanwhile is a new one (its own time), left due.
	rec.RequestedAt, rec.RequestedFull, rec.VerifiedAt = b.Spec.VerifyRequestedAt, b.Spec.VerifyFull, metav1.NewTime(c.now())
	if err := c.writeBackup(ctx, key, b, rec); err != nil {
		return kit.Result{}, err
	}
	if err := c.writeVolume(ctx, volume, b.Name, rec); err != nil {
		return kit.Result{}, err
	}
	c.report(b, volume, rec, c.nextBackupFull(volume, b, rec), log)
	return kit.Result{}, nil
}

// drill reads the backup back from its target.
func (c *Controller) drill(ctx context.Context, targetName, volume, backup string, log *logrus.Entry) (*backupstore.VerifyResult, error) {
	t, err := c.ds.GetTarget(targetName)
	if err != nil {
		return nil, err
	}
	cred, err := c.ds.TargetCredential(ctx, t)
	if err != nil {
		return nil, err
	}
	store, err := backupstore.OpenWithCredential(t.URL, cred)
	if err != nil {
		return nil, err
	}
	concurrency, err := c.ds.GetSettingAsInt(types.SettingNameBackupConcurrentLimit)
	if err != nil || concurrency <= 0 {
		concurrency = backupstore.DefaultConcurrency
	}
	v := store.NewVerifier(concurrency)
	next := 25
	v.Progress = func(_, _ string, percent int) {
		if percent >= next && percent < 100 {
			log.WithField("progress", percent).Info("Drilling the backup")
			next = percent/25*25 + 25
		}
	}
	return v.Verify(ctx, volume, backup)
}

// writeBackup records the drill on the Backup; the verification is this
// controller's field alone. A conflict (the target controller's poll
// wrote meanwhile) is retried on a fresh read, never by drilling again.
func (c *Controller) writeBackup(ctx context.Context, key string, b *longhorn.Backup, rec longhorn.BackupVerification) error {
	err := datastore.RetryOnConflict(func() error {
		live, err := c.ds.GetBackupFresh(ctx, b.Name)
		if err != nil {
			return err
		}
		if live.UID != b.UID {
			return nil // deleted and made again meanwhile: not the backup drilled
		}
		updated := live.DeepCopy()
		updated.Status.Verification = &rec
		stored, err := c.ds.UpdateBackupStatus(ctx, updated)
		if err == nil {
			c.written.Remember(key, stored.ResourceVersion)
		}
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("record the drill of backup %s: %w", b.Name, err)
	}
	return nil
}

// writeVolume records the drill on the volume when the backup is the
// volume's newest Completed one, in any target (a drill of an older
// backup says nothing of what the volume restores to now). A backup of a
// volume no longer in the cluster is recorded on the Backup alone.
func (c *Controller) writeVolume(ctx context.Context, volume, backup string, rec longhorn.BackupVerification) error {
	return datastore.RetryOnConflict(func() error {
		v, err := c.ds.GetVolumeFresh(ctx, volume)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		backups, err := c.ds.ListBackupsRO(volume)
		if err != nil {
			return err
		}
		if newest := datastore.NewestCompletedBackup(backups); newest == nil || newest.Name != backup {
			return nil
		}
		if rec.Result == longhorn.BackupVerificationError && v.Status.LastBackupVerification != nil && v.Status.LastBackupVerification.Backup == backup {
			// A drill that could not be made leaves what was known.
			return nil
		}
		updated := v.DeepCopy()
		onVolume := rec
		onVolume.Backup = backup
		updated.Status.LastBackupVerification = &onVolume
		_, err = c.ds.UpdateVolumeStatus(ctx, updated)
		return err
	})
}

// nextBackupFull tells whether the volume's next backup to b's target is
// full now that b's drill found rec (datastore.NextBackupFull over the
// cached backups, b as drilled: the cache may not have the write yet).
// A volume no longer in the cluster has no next backup.
func (c *Controller) nextBackupFull(volume string, b *longhorn.Backup, rec longhorn.BackupVerification) bool {
	v, err := c.ds.GetVolumeRO(volume)
	if err != nil {
		return false
	}
	backups, err := c.ds.ListBackupsRO(volume)
	if err != nil {
		return false
	}
	drilled := b.DeepCopy()
	drilled.Status.Verification = &rec
	list := []*longhorn.Backup{drilled}
	for _, other := range backups {
		if other.Name != b.Name {
			list = append(list, other)
		}
	}
	full, _ := datastore.NextBackupFull(v, list, datastore.BackupTargetOf(b))
	return full
}

// report logs the drill and says it in an event on the volume (on the
// Backup when the volume is gone), naming the backup and its target.
func (c *Controller) report(b *longhorn.Backup, volume string, rec longhorn.BackupVerification, full bool, log *logrus.Entry) {
	which := fmt.Sprintf("backup %s in backup target %s", b.Name, datastore.BackupTargetOf(b))
	log = log.WithFields(logrus.Fields{"result": rec.Result, "badBlocks": rec.BadBlocks, "blocksRead": rec.BlocksRead, "digest": rec.Digest, "seconds": rec.DurationSeconds})
	var obj runtime.Object = b
	if v, err := c.ds.GetVolumeRO(volume); err == nil {
		obj = v
	}
	switch rec.Result {
	case longhorn.BackupVerificationPassed:
		msg := fmt.Sprintf("%s: every block read back whole (%d blocks read, digest %s)", which, rec.BlocksRead, rec.Digest)
		if f := rec.Full; f != nil {
			msg += fmt.Sprintf("; restored in %ss, filesystem %s, check %s", f.RestoreSeconds, f.Filesystem, f.FilesystemCheck)
			log = log.WithFields(logrus.Fields{"restoreSeconds": f.RestoreSeconds, "filesystem": f.Filesystem, "filesystemCheck": f.FilesystemCheck})
		}
		log.Info("Backup drill passed: every block read back whole")
		c.event(obj, corev1.EventTypeNormal, EventBackupVerified, msg)
	case longhorn.BackupVerificationFailed:
		msg := fmt.Sprintf("%s is damaged: %s", which, rec.Message)
		if full {
			msg += "; the volume's next backup will be full in backup target " + datastore.BackupTargetOf(b) + ", so the damaged blocks stop being shared"
		}
		log.WithField("problem", rec.Message).Warn("Backup drill failed: the backup is damaged")
		c.event(obj, corev1.EventTypeWarning, EventBackupVerifyFailed, msg)
	default:
		log.WithField("reason", rec.Message).Warn("Backup drill could not be made")
		c.event(obj, corev1.EventTypeWarning, EventBackupVerifyError, fmt.Sprintf("%s: %s", which, rec.Message))
	}
}

func (c *Controller) event(obj runtime.Object, kind, reason, msg string) {
	if c.recorder != nil {
		c.recorder.Event(obj, kind, reason, msg)
	}
}
