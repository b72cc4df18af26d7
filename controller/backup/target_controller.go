package backup

import (
	"context"
	"errors"
	"sort"
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

// TargetController mirrors the backup target into BackupVolume and
// Backup objects: what the target holds (Completed), and what engines are
// backing up (InProgress, Error). Deleting a Backup object deletes the
// backup from the target; deleting a BackupVolume deletes all of the
// volume's backups from it. One node does this: the first Ready node by
// name, so the objects have one writer.
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
// Ownership: the first Ready node by name. It differs from kit.Ownership
// because the target was a setting with no object to record an owner in
// when this was written, and every node can compute this from the Node
// objects.
type TargetController struct {
	*kit.Base
	ds       *datastore.DataStore
	nodeID   string
	recorder record.EventRecorder
	health   targetHealth
	// now is the clock; time.Now but in tests.
	now func() time.Time

	// lastPoll is the last poll of the whole target this node made
	// (zero before the first): what the next one is timed from. Lost on a
	// restart, which then polls at start.
	mu       sync.Mutex
	lastPoll lastPoll
}

// BackupVolumeMessageTarget is the key of a BackupVolume's message saying
// why the backup target cannot be read.
const BackupVolumeMessageTarget = "backupTarget"

// Queue key prefixes, after the namespace: a volume's refresh from the
// target, and a volume's mirror of its engines' backups.
const (
	refreshPrefix = "backup-volume/"
	mirrorPrefix  = "engine-backups/"
)

// NewTargetController wires the controller to the informers that
// can change what it writes.
func NewTargetController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, recorder record.EventRecorder) *TargetController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	c := &TargetController{ds: ds, nodeID: nodeID, recorder: recorder, now: time.Now}
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
	c.Queue.Add(c.key())
	return c
}

// key is the target's queue key: a poll, when one is due.
func (c *TargetController) key() string { return c.ds.Namespace() + "/backup-target" }

func (c *TargetController) refreshKey(volume string) string {
	return c.ds.Namespace() + "/" + refreshPrefix + volume
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
		c.Queue.Add(c.refreshKey(e.Spec.VolumeName))
	case workMirror:
		c.Queue.Add(c.mirrorKey(e.Spec.VolumeName))
	}
}

func (c *TargetController) enqueueBackup(obj any) {
	if b, ok := obj.(*longhorn.Backup); ok && backupWork(b) == workRefresh {
		c.Queue.Add(c.refreshKey(backupVolumeOf(b)))
	}
}

func (c *TargetController) enqueueBackupVolume(obj any) {
	if bv, ok := obj.(*longhorn.BackupVolume); ok && backupVolumeWork(bv) == workRefresh {
		c.Queue.Add(c.refreshKey(bv.Name))
	}
}

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
	_, rest, _ := strings.Cut(key, "/")
	if !c.leader() {
		c.notPolling()
		if rest == "backup-target" {
			return kit.Result{RequeueAfter: leaderCheckPeriod}, nil
		}
		return kit.Result{}, nil
	}
	switch {
	case strings.HasPrefix(rest, refreshPrefix):
		return c.syncRefresh(ctx, strings.TrimPrefix(rest, refreshPrefix))
	case strings.HasPrefix(rest, mirrorPrefix):
		return kit.Result{}, c.syncMirror(ctx, strings.TrimPrefix(rest, mirrorPrefix))
	}
	return c.syncPoll(ctx)
}

// targetError is a backup target that cannot be opened or read.
type targetError struct{ err error }

func (e *targetError) Error() string { return e.err.Error() }
func (e *targetError) Unwrap() error { return e.err }

func isTargetError(err error) bool {
	var te *targetError
	return errors.As(err, &te)
}

// openTarget opens the target the setting names; nil, nil when none is
// set.
func (c *TargetController) openTarget(ctx context.Context) (*backupstore.Store, error) {
	target, err := c.ds.GetSettingValue(types.SettingNameBackupTarget)
	if err != nil || target == "" {
		return nil, err
	}
	var cred map[string]string
	if backupstore.UsesCredential(target) {
		if cred, err = c.ds.GetBackupTargetCredential(ctx); err != nil {
			return nil, &targetError{err}
		}
	}
	store, err := backupstore.OpenWithCredential(target, cred)
	if err != nil {
		return nil, &targetError{err}
	}
	return store, nil
}

// reportIfUnavailable says why the target cannot be read when err is a
// targetError, and returns err.
func (c *TargetController) reportIfUnavailable(ctx context.Context, err error) error {
	var te *targetError
	if errors.As(err, &te) {
		c.reportUnavailable(ctx, te)
	}
	return err
}

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
