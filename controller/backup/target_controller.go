package backup

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// leaderCheckPeriod is how often a node that does not poll the target
// checks whether it has become the one that does (no target request).
const leaderCheckPeriod = 30 * time.Second

// deletionRetryPeriod is how soon a deletion that found the volume busy
// in the target (a backup or restore of it running) is tried again.
const deletionRetryPeriod = 30 * time.Second

// TargetController mirrors each backup target (default, from the backup
// settings, and every other BackupTarget) into BackupVolume and Backup
// objects that name it: what the target holds (Completed), and what
// engines are backing up to it (InProgress, Error). Deleting a Backup
// object deletes the backup from its target; deleting a BackupVolume
// deletes all of the volume's backups from its target. Each target has
// one writer, its BackupTarget's owner (kit.Ownership, status.ownerID),
// and is polled on its own; a target that cannot be read stops nothing
// of another's.
//
// The target is read as seldom as it can be (see docs/backups.md): the
// whole of it once per backupstore-poll-interval (and at start and when
// the target setting changes), one volume when a backup of it finished or
// a deletion of it was asked, and never for an engine change that is not
// a finished backup. Three kinds of queue key say which: the target's
// (a poll, when due), a volume's refresh, and a volume's mirror of what
// its engines report.
//
// A target it cannot read (a missing or refused credential, a missing
// bucket, an unreachable server) is said in every BackupVolume's
// messages and in a Warning event on the setting to fix:
// backup-target-credential-secret when the credential is at fault,
// backup-target otherwise.
//
// What a poll finds is also written into the "default" BackupTarget's
// status (target_status.go); the settings it reads are kept in step with
// default's spec by controller/backuptarget.
//
// A BackupTarget deleted leaves its objects behind no longer: they are
// removed as objects gone from a target are (labelled
// delete-custom-resource-only), deleting nothing from any target.
type TargetController struct {
	*kit.Base
	ds        *datastore.DataStore
	nodeID    string
	recorder  record.EventRecorder
	ownership kit.Ownership
	health    targetHealth
	// now is the clock; time.Now but in tests.
	now func() time.Time

	// lastPoll is the last poll of each whole target this node made, by
	// target name (none before the first): what the next one is timed
	// from. Lost on a restart, which then polls at start.
	mu       sync.Mutex
	lastPoll map[string]lastPoll
}

// BackupVolumeMessageTarget is the key of a BackupVolume's message saying
// why the backup target cannot be read.
const BackupVolumeMessageTarget = "backupTarget"

// Queue key prefixes, after the namespace: a target's poll
// (poll/<target>), a volume's refresh from a target
// (backup-volume/<target>/<volume>), and a volume's mirror of its
// engines' backups (engine-backups/<volume>).
const (
	pollPrefix    = "poll/"
	refreshPrefix = "backup-volume/"
	mirrorPrefix  = "engine-backups/"
)

// NewTargetController wires the controller to the informers that
// can change what it writes.
func NewTargetController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, recorder record.EventRecorder) *TargetController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &TargetController{ds: ds, nodeID: nodeID, recorder: recorder, now: time.Now,
		ownership: kit.Ownership{NodeID: nodeID, IsUp: ds.IsNodeUp}, lastPoll: map[string]lastPoll{}}
	c.Base = kit.NewBase("longhorn-backup-target", logger, metrics, c.sync,
		lh.Backups().Informer().HasSynced, lh.BackupVolumes().Informer().HasSynced, lh.Engines().Informer().HasSynced, lh.Settings().Informer().HasSynced,
		lh.BackupTargets().Informer().HasSynced)
	lh.Engines().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.enqueueEngine(nil, asEngine(obj)) },
		UpdateFunc: func(old, cur any) { c.enqueueEngine(asEngine(old), asEngine(cur)) },
		DeleteFunc: func(obj any) { c.enqueueEngine(asEngine(obj), nil) },
	})
	lh.Backups().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueBackup,
		UpdateFunc: func(_, cur any) { c.enqueueBackup(cur) },
	})
	lh.BackupVolumes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueBackupVolume,
		UpdateFunc: func(_, cur any) { c.enqueueBackupVolume(cur) },
	})
	lh.Settings().Informer().AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool {
			s, ok := obj.(*longhorn.Setting)
			if !ok {
				return false
			}
			switch types.SettingName(s.Name) {
			case types.SettingNameBackupTarget, types.SettingNameBackupTargetCredentialSecret, types.SettingNameBackupstorePollInterval:
				return true
			}
			return false
		},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.Queue.Add(c.key()) },
			UpdateFunc: func(_, _ any) { c.Queue.Add(c.key()) },
			DeleteFunc: func(any) { c.Queue.Add(c.key()) },
		},
	})
	lh.BackupTargets().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueTarget(nil, obj) },
		UpdateFunc: func(old, cur any) {
			o, _ := old.(*longhorn.BackupTarget)
			c.enqueueTarget(o, cur)
		},
		DeleteFunc: func(obj any) { c.enqueueTarget(nil, obj) },
	})
	c.Queue.Add(c.key())
	return c
}

// key is default's poll key: a poll, when one is due.
func (c *TargetController) key() string { return c.pollKey(datastore.DefaultBackupTargetName) }

// pollKey is a target's poll key.
func (c *TargetController) pollKey(target string) string {
	return c.ds.Namespace() + "/" + pollPrefix + target
}

// refreshKey is the key of a refresh of volume in default.
func (c *TargetController) refreshKey(volume string) string {
	return c.refreshKeyIn(datastore.DefaultBackupTargetName, volume)
}

// refreshKeyIn is the key of a refresh of volume in target.
func (c *TargetController) refreshKeyIn(target, volume string) string {
	return c.ds.Namespace() + "/" + refreshPrefix + datastore.TargetName(target) + "/" + volume
}

// enqueueTarget brings a target's poll key when it is made, deleted, its
// spec changes or its owner does; not on the status a poll writes.
func (c *TargetController) enqueueTarget(old *longhorn.BackupTarget, obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	bt, ok := obj.(*longhorn.BackupTarget)
	if !ok {
		return
	}
	if old != nil && old.Spec == bt.Spec && old.Status.OwnerID == bt.Status.OwnerID && old.DeletionTimestamp.Equal(bt.DeletionTimestamp) {
		return
	}
	c.Queue.Add(c.pollKey(bt.Name))
}

func (c *TargetController) mirrorKey(volume string) string {
	return c.ds.Namespace() + "/" + mirrorPrefix + volume
}

func asEngine(obj any) *longhorn.Engine {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	e, _ := obj.(*longhorn.Engine)
	return e
}

func (c *TargetController) enqueueEngine(old, cur *longhorn.Engine) {
	e := cur
	if e == nil {
		e = old
	}
	if e == nil {
		return
	}
	switch engineWork(old, cur) {
	case workRefresh:
		// The volume is read from the target of each backup that
		// finished or stopped, and from no other.
		for _, st := range refreshed(old, cur) {
			if target := c.engineBackupTarget(e, st); target != "" {
				c.Queue.Add(c.refreshKeyIn(target, e.Spec.VolumeName))
			}
		}
	case workMirror:
		c.Queue.Add(c.mirrorKey(e.Spec.VolumeName))
	}
}

func (c *TargetController) enqueueBackup(obj any) {
	if b, ok := obj.(*longhorn.Backup); ok && backupWork(b) == workRefresh {
		c.Queue.Add(c.refreshKeyIn(datastore.BackupTargetOf(b), backupVolumeOf(b)))
	}
}

func (c *TargetController) enqueueBackupVolume(obj any) {
	if bv, ok := obj.(*longhorn.BackupVolume); ok && backupVolumeWork(bv) == workRefresh {
		c.Queue.Add(c.refreshKeyIn(datastore.BackupVolumeTarget(bv), datastore.BackupVolumeVolume(bv)))
	}
}

func (c *TargetController) sync(ctx context.Context, key string) (kit.Result, error) {
	_, rest, _ := strings.Cut(key, "/")
	switch {
	case strings.HasPrefix(rest, refreshPrefix):
		target, volume, _ := strings.Cut(strings.TrimPrefix(rest, refreshPrefix), "/")
		t, owned, err := c.ownedTarget(ctx, target)
		if err != nil || !owned {
			return kit.Result{}, err
		}
		return c.syncRefresh(ctx, t, volume)
	case strings.HasPrefix(rest, mirrorPrefix):
		return kit.Result{}, c.syncMirror(ctx, strings.TrimPrefix(rest, mirrorPrefix))
	case strings.HasPrefix(rest, pollPrefix):
		target := strings.TrimPrefix(rest, pollPrefix)
		t, owned, err := c.ownedTarget(ctx, target)
		if apierrors.IsNotFound(err) {
			c.notPolling(target)
			return kit.Result{}, c.syncGoneTarget(ctx, target)
		}
		if err != nil {
			return kit.Result{}, err
		}
		if !owned {
			c.notPolling(target)
			return kit.Result{RequeueAfter: leaderCheckPeriod}, nil
		}
		return c.syncPoll(ctx, t)
	}
	return kit.Result{}, nil
}

// ownedTarget returns the target of that name and whether this node is
// its owner (claiming it when no up node is). A target whose BackupTarget
// does not exist yet (default before controller/backuptarget makes it)
// has no owner: a NotFound error.
func (c *TargetController) ownedTarget(ctx context.Context, name string) (datastore.Target, bool, error) {
	name = datastore.TargetName(name)
	bt, err := c.ds.GetBackupTargetRO(name)
	if err != nil {
		return datastore.Target{}, false, err
	}
	if bt.DeletionTimestamp != nil || !c.ownership.Responsible(bt.Status.OwnerID, "") {
		return datastore.Target{}, false, nil
	}
	log := c.Logger.WithField("backupTarget", name)
	if _, err := c.ownership.Claim(log, bt.Status.OwnerID, func(owner string) error {
		claimed := bt.DeepCopy()
		claimed.Status.OwnerID = owner
		_, err := c.ds.UpdateBackupTargetStatus(ctx, claimed)
		return err
	}); err != nil {
		return datastore.Target{}, false, err
	}
	t, err := c.ds.GetTarget(name)
	return t, err == nil, err
}

// targetError is a backup target that cannot be opened or read.
type targetError struct{ err error }

func (e *targetError) Error() string { return e.err.Error() }
func (e *targetError) Unwrap() error { return e.err }

func isTargetError(err error) bool {
	var te *targetError
	return errors.As(err, &te)
}

// openTarget opens target; nil, nil when it has no URL. A target at
// another's place is refused (shared_location.go).
func (c *TargetController) openTarget(ctx context.Context, t datastore.Target) (*backupstore.Store, error) {
	if t.URL == "" {
		return nil, nil
	}
	placed, err := c.placedTargets()
	if err != nil {
		return nil, err
	}
	if holder := locationHolder(t.Name, placed); holder != nil {
		return nil, &targetError{sharedLocationError(holder)}
	}
	var cred map[string]string
	if backupstore.UsesCredential(t.URL) {
		if cred, err = c.ds.TargetCredential(ctx, t); err != nil {
			return nil, &targetError{err}
		}
	}
	store, err := backupstore.OpenWithCredential(t.URL, cred)
	if err != nil {
		return nil, &targetError{err}
	}
	return store, nil
}

// reportIfUnavailable says why target cannot be read when err is a
// targetError, and returns err.
func (c *TargetController) reportIfUnavailable(ctx context.Context, target string, err error) error {
	var te *targetError
	if errors.As(err, &te) {
		c.reportUnavailable(ctx, target, te)
	}
	return err
}

// reportUnavailable says why target cannot be read: a Warning event on
// what to fix (the recorder folds the repeats of each poll into one event
// with a count), the setting for default, the BackupTarget for another,
// and a message on every BackupVolume in that target.
func (c *TargetController) reportUnavailable(ctx context.Context, target string, te *targetError) {
	if c.recorder != nil {
		if target == datastore.DefaultBackupTargetName {
			setting := types.SettingNameBackupTarget
			if datastore.IsCredentialError(te) || backupstore.IsCredentialError(te) {
				setting = types.SettingNameBackupTargetCredentialSecret
			}
			if s, err := c.ds.GetSettingRO(setting); err == nil {
				c.recorder.Event(s, corev1.EventTypeWarning, "BackupTargetUnavailable", te.Error())
			}
		} else if bt, err := c.ds.GetBackupTargetRO(target); err == nil {
			c.recorder.Event(bt, corev1.EventTypeWarning, "BackupTargetUnavailable", te.Error())
		}
	}
	msg := "the backup target cannot be read: " + te.Error()
	bvs, err := c.ds.ListBackupVolumesRO()
	if err != nil {
		return
	}
	for _, bv := range bvs {
		if datastore.BackupVolumeTarget(bv) != target || bv.Status.Messages[BackupVolumeMessageTarget] == msg {
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
