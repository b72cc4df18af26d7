package systembackup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/types"
)

var everything = labels.Everything()

// volumeBackupTimeout bounds the volume backups of one system backup.
const volumeBackupTimeout = 6 * time.Hour

// Config is what both controllers are told of the manager.
type Config struct {
	NodeID string
	// Version is the Longhorn version folder archives are written under
	// (status.version); GitCommit and ManagerImage are recorded.
	Version, GitCommit, ManagerImage string
	// InternalTLS is the identity the engines are called with.
	InternalTLS *mtls.Identity
	// ManagerUser is the manager's own account as the apiserver knows it
	// (rights.ServiceAccountUser): a restore it asks for is not checked
	// again (restore_rights.go).
	ManagerUser string
}

// BackupController makes, syncs and deletes system backups.
//
// Ownership: kit.Ownership with no preferred node, in status.ownerID. The
// sync of the default target's archives into SystemBackup objects is
// done by the default BackupTarget's owner, under the key targetKey.
type BackupController struct {
	*kit.Base
	ds          *datastore.DataStore
	ownership   kit.Ownership
	cfg         Config
	internalTLS *mtls.Identity
	now         func() time.Time
	// written: what the controller's own writes returned, so that a sync
	// never runs a step again on a cached copy older than its write.
	written kit.Written
}

func (c *BackupController) writeStatus(ctx context.Context, sb *longhorn.SystemBackup) (*longhorn.SystemBackup, error) {
	stored, err := c.ds.UpdateSystemBackupStatus(ctx, sb)
	if err == nil {
		c.written.Remember(sb.Namespace+"/"+sb.Name, stored.ResourceVersion)
	}
	return stored, err
}

func (c *BackupController) writeMeta(ctx context.Context, sb *longhorn.SystemBackup) (*longhorn.SystemBackup, error) {
	stored, err := c.ds.UpdateSystemBackup(ctx, sb)
	if err == nil {
		c.written.Remember(sb.Namespace+"/"+sb.Name, stored.ResourceVersion)
	}
	return stored, err
}

// NewBackupController wires the controller to the SystemBackup and
// BackupTarget informers.
func NewBackupController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, cfg Config) *BackupController {
	lh := inf.Longhorn.Longhorn().V1beta2()
	sbs := lh.SystemBackups().Informer()
	targets := lh.BackupTargets().Informer()
	c := &BackupController{ds: ds, ownership: kit.Ownership{NodeID: cfg.NodeID, IsUp: ds.IsNodeUp}, cfg: cfg, internalTLS: cfg.InternalTLS, now: time.Now}
	c.Base = kit.NewBase("longhorn-system-backup", logger, metrics, c.sync, sbs.HasSynced, targets.HasSynced)
	sbs.AddEventHandler(c.EventHandler())
	enqueueTarget := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if bt, ok := obj.(*longhorn.BackupTarget); ok && bt.Name == datastore.DefaultBackupTargetName {
			c.Queue.Add(c.targetKey())
		}
	}
	targets.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueueTarget, UpdateFunc: func(old, cur any) {
		o, n := old.(*longhorn.BackupTarget), cur.(*longhorn.BackupTarget)
		if o.Spec != n.Spec || o.Status.OwnerID != n.Status.OwnerID {
			enqueueTarget(cur)
		}
	}})
	return c
}

// targetKey is the queue key of the default target's archive sync: no
// SystemBackup may be named so.
func (c *BackupController) targetKey() string { return c.ds.Namespace() + "/#default-target" }

func (c *BackupController) sync(ctx context.Context, key string) (kit.Result, error) {
	if key == c.targetKey() {
		return c.syncTarget(ctx)
	}
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, nil
	}
	sb, err := c.ds.GetSystemBackupRO(name)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if c.written.Stale(key, sb.ResourceVersion) || !c.ownership.Responsible(sb.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithField("systemBackup", sb.Name)
	if claimed, err := c.ownership.Claim(log, sb.Status.OwnerID, func(owner string) error {
		claimed := sb.DeepCopy()
		claimed.Status.OwnerID = owner
		_, err := c.writeStatus(ctx, claimed)
		return err
	}); claimed || err != nil {
		return kit.Result{}, err
	}
	if sb.DeletionTimestamp != nil {
		return kit.Result{}, c.delete(ctx, sb, log)
	}
	if !kit.HasFinalizer(sb) {
		sb = sb.DeepCopy()
		kit.AddFinalizer(sb)
		_, err := c.writeMeta(ctx, sb)
		return kit.Result{}, err
	}
	switch sb.Status.State {
	case longhorn.SystemBackupStateReady, longhorn.SystemBackupStateError:
		return kit.Result{}, nil
	}
	if v := sb.Labels[types.LabelVersion]; v != "" {
		return kit.Result{}, c.syncFromTarget(ctx, sb, v, log)
	}
	return kit.Result{}, c.make(ctx, sb, log)
}

// target is the default backup target, opened: its store and driver
// (nil when no target is set), and the credential it takes.
type target struct {
	datastore.Target
	store  *backupstore.Store
	driver backupstore.Driver
	cred   map[string]string
}

// openDefaultTarget opens the default backup target.
func openDefaultTarget(ctx context.Context, ds *datastore.DataStore) (target, error) {
	t, err := ds.GetTarget(datastore.DefaultBackupTargetName)
	if err != nil || t.URL == "" {
		return target{Target: t}, err
	}
	var cred map[string]string
	if backupstore.UsesCredential(t.URL) {
		if cred, err = ds.TargetCredential(ctx, t); err != nil {
			return target{Target: t}, err
		}
	}
	d, err := backupstore.NewDriver(t.URL, cred)
	if err != nil {
		return target{Target: t}, err
	}
	return target{Target: t, store: backupstore.NewStore(t.URL, d), driver: d, cred: cred}, nil
}

// errNoTarget is said when the backup-target setting is empty.
var errNoTarget = errors.New("no backup target is set (the backup-target setting is empty)")

// setState writes the state (and, on an error, the Error condition
// with the reason) and returns the stored copy.
func (c *BackupController) setState(ctx context.Context, sb *longhorn.SystemBackup, state longhorn.SystemBackupState, reason string, cause error) (*longhorn.SystemBackup, error) {
	sb = sb.DeepCopy()
	sb.Status.State = state
	if cause != nil {
		sb.Status.Conditions = kit.SetCondition(sb.Status.Conditions, longhorn.SystemBackupConditionTypeError, longhorn.ConditionStatusTrue, reason, cause.Error(), c.now())
	}
	return c.writeStatus(ctx, sb)
}

// make runs a new system backup from the start: the volume backups, the
// archive, its upload. A manager that stopped half way starts again
// (its archive, if any, is overwritten by its own).
func (c *BackupController) make(ctx context.Context, sb *longhorn.SystemBackup, log *logrus.Entry) error {
	fail := func(reason string, err error) error {
		log.WithError(err).WithField("reason", reason).Warn("System backup failed")
		_, werr := c.setState(ctx, sb, longhorn.SystemBackupStateError, reason, err)
		return werr
	}
	if _, err := systembackup.ParsePolicy(string(sb.Spec.VolumeBackupPolicy)); err != nil {
		return fail(longhorn.SystemBackupConditionReasonGenerate, err)
	}
	t, err := openDefaultTarget(ctx, c.ds)
	if err != nil {
		return fail(longhorn.SystemBackupConditionReasonUpload, fmt.Errorf("default backup target: %w", err))
	}
	if t.driver == nil {
		return fail(longhorn.SystemBackupConditionReasonUpload, errNoTarget)
	}
	if sb.Status.Version == "" || sb.Status.State == longhorn.SystemBackupStateNone {
		st := sb.DeepCopy()
		st.Status.Version, st.Status.GitCommit, st.Status.ManagerImage = c.cfg.Version, c.cfg.GitCommit, c.cfg.ManagerImage
		st.Status.CreatedAt = metav1.NewTime(c.now().UTC().Truncate(time.Second))
		st.Status.State = longhorn.SystemBackupStateVolumeBackup
		if sb, err = c.writeStatus(ctx, st); err != nil {
			return err
		}
	}
	if sb.Status.State != longhorn.SystemBackupStateVolumeBackup {
		if sb, err = c.setState(ctx, sb, longhorn.SystemBackupStateVolumeBackup, "", nil); err != nil {
			return err
		}
	}
	log.WithField("volumeBackupPolicy", sb.Spec.VolumeBackupPolicy).Info("Backing up the volumes the system backup needs")
	vctx, cancel := context.WithTimeout(ctx, volumeBackupTimeout)
	backups, err := c.backupVolumes(vctx, sb, t)
	cancel()
	if err != nil {
		return fail(longhorn.SystemBackupConditionReasonGenerate, err)
	}
	if sb, err = c.setState(ctx, sb, longhorn.SystemBackupStateGenerating, "", nil); err != nil {
		return err
	}
	contents, err := c.collect(ctx, backups)
	if err != nil {
		return err
	}
	contents.Meta = systembackup.Meta{LonghornVersion: sb.Status.Version, LonghornGitCommit: sb.Status.GitCommit,
		SystemBackupCreatedAt: sb.Status.CreatedAt, ManagerImage: sb.Status.ManagerImage}
	archive, err := systembackup.Build(sb.Name, contents)
	if err != nil {
		return fail(longhorn.SystemBackupConditionReasonGenerate, err)
	}
	if sb, err = c.setState(ctx, sb, longhorn.SystemBackupStateUploading, "", nil); err != nil {
		return err
	}
	if err := systembackup.Upload(t.driver, systembackup.Config{Name: sb.Name, LonghornVersion: sb.Status.Version, LonghornGitCommit: sb.Status.GitCommit,
		BackupTargetURL: t.URL, ManagerImage: sb.Status.ManagerImage, CreatedAt: sb.Status.CreatedAt.Time}, archive); err != nil {
		return fail(longhorn.SystemBackupConditionReasonUpload, err)
	}
	log.WithFields(logrus.Fields{"volumes": len(contents.Volumes), "bytes": len(archive), "target": t.URL}).Info("System backup uploaded")
	st := sb.DeepCopy()
	st.Status.State = longhorn.SystemBackupStateReady
	st.Status.LastSyncedAt = metav1.NewTime(c.now().UTC())
	_, err = c.writeStatus(ctx, st)
	return err
}

// syncFromTarget fills the status of a SystemBackup made for an archive
// found in the target, from its record.
func (c *BackupController) syncFromTarget(ctx context.Context, sb *longhorn.SystemBackup, version string, log *logrus.Entry) error {
	t, err := openDefaultTarget(ctx, c.ds)
	if err == nil && t.driver == nil {
		err = errNoTarget
	}
	if err != nil {
		return err // the target may come back; retried
	}
	cfg, err := systembackup.LoadConfig(t.driver, version, sb.Name)
	if err != nil {
		log.WithError(err).Warn("The system backup's record in the target cannot be used")
		_, werr := c.setState(ctx, sb, longhorn.SystemBackupStateError, longhorn.SystemBackupConditionReasonSync, err)
		return werr
	}
	st := sb.DeepCopy()
	st.Status.State = longhorn.SystemBackupStateReady
	st.Status.Version, st.Status.GitCommit, st.Status.ManagerImage = cfg.LonghornVersion, cfg.LonghornGitCommit, cfg.ManagerImage
	st.Status.CreatedAt = metav1.NewTime(cfg.CreatedAt)
	st.Status.LastSyncedAt = metav1.NewTime(c.now().UTC())
	_, err = c.writeStatus(ctx, st)
	return err
}

// delete deletes the archive in the default target (a user's request),
// then lets the object go. Without a target set there is nothing this
// manager can delete: the object goes and the archive, wherever it is,
// stays.
func (c *BackupController) delete(ctx context.Context, sb *longhorn.SystemBackup, log *logrus.Entry) error {
	if !kit.HasFinalizer(sb) {
		return nil
	}
	if sb.Status.Version != "" && systembackup.CheckVersion(sb.Status.Version) == nil {
		t, err := openDefaultTarget(ctx, c.ds)
		if err != nil {
			return fmt.Errorf("delete the archive of system backup %s: %w", sb.Name, err)
		}
		if t.driver != nil {
			err := systembackup.Delete(t.driver, sb.Status.Version, sb.Name, sb.Status.CreatedAt.Time)
			switch {
			case errors.Is(err, systembackup.ErrOther):
				log.WithError(err).Warn("The archive of this name in the backup target is not this system backup's: it is left as it is")
			case err != nil:
				return fmt.Errorf("delete the archive of system backup %s: %w", sb.Name, err)
			default:
				log.WithField("version", sb.Status.Version).Info("Deleted the system backup's archive from the backup target")
			}
		} else {
			log.Warn("No backup target is set: the system backup's archive, if any, is left where it is")
		}
	}
	sb = sb.DeepCopy()
	kit.RemoveFinalizer(sb)
	_, err := c.writeMeta(ctx, sb)
	return err
}

// syncTarget makes a SystemBackup for each archive of the default target
// this cluster has none of, and reads the target again at its poll
// interval. Only the default BackupTarget's owner does it.
func (c *BackupController) syncTarget(ctx context.Context) (kit.Result, error) {
	bt, err := c.ds.GetBackupTargetRO(datastore.DefaultBackupTargetName)
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if bt.Status.OwnerID != c.cfg.NodeID {
		return kit.Result{}, nil
	}
	t, err := openDefaultTarget(ctx, c.ds)
	if err != nil || t.driver == nil {
		if err != nil {
			c.Logger.WithError(err).Debug("The default backup target cannot be read for its system backups")
		}
		return c.nextPoll(t.Target), nil // the target controller says why
	}
	found, err := systembackup.List(t.driver)
	if err != nil {
		c.Logger.WithError(err).Debug("The default backup target's system backups cannot be listed")
		return c.nextPoll(t.Target), nil
	}
	for name, version := range found {
		if _, err := c.ds.GetSystemBackupRO(name); !apierrors.IsNotFound(err) {
			continue
		}
		if _, err := systembackup.LoadConfig(t.driver, version, name); err != nil {
			// Not there yet (an upload under way) or not usable: no
			// object for it.
			continue
		}
		sb := &longhorn.SystemBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelVersion: version}}}
		if _, err := c.ds.CreateSystemBackup(ctx, sb); err != nil && !apierrors.IsAlreadyExists(err) {
			return kit.Result{}, err
		}
		c.Logger.WithFields(logrus.Fields{"systemBackup": name, "version": version}).Info("Found a system backup in the backup target")
	}
	return c.nextPoll(t.Target), nil
}

func (c *BackupController) nextPoll(t datastore.Target) kit.Result {
	return kit.Result{RequeueAfter: t.PollInterval}
}
