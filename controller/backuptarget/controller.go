package backuptarget

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// ReasonInvalidSpec is the Warning event on "default" when a spec field
// it was given breaks the rule of the setting it mirrors.
const ReasonInvalidSpec = "InvalidSpec"

// Controller keeps "default" and the backup settings in step (see
// decide). It makes "default" again from the settings when it is
// deleted. Other BackupTargets are left alone.
//
// Ownership: kit.Ownership with no preferred node, recorded in default's
// status.ownerID.
type Controller struct {
	*kit.Base
	ds        *datastore.DataStore
	recorder  record.EventRecorder
	ownership kit.Ownership
	// written: what the controller's own writes returned, by queue key of
	// default and of each setting, so that a sync never decides on a
	// cached copy older than its own write (a setting it just wrote,
	// seen at its old value, would look changed and be copied back).
	written kit.Written
}

// NewController wires the controller to the BackupTarget and Setting
// informers.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, nodeID string, recorder record.EventRecorder) *Controller {
	lh := inf.Longhorn.Longhorn().V1beta2()
	targets := lh.BackupTargets().Informer()
	settings := lh.Settings().Informer()
	c := &Controller{ds: ds, recorder: recorder, ownership: kit.Ownership{NodeID: nodeID, IsUp: ds.IsNodeUp}}
	c.Base = kit.NewBase("longhorn-backup-target-settings", logger, metrics, c.sync, targets.HasSynced, settings.HasSynced)
	enqueue := func(any) { c.Queue.Add(c.key()) }
	targets.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool { return objectName(obj) == datastore.DefaultBackupTargetName },
		Handler:    cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue},
	})
	settings.AddEventHandler(cache.FilteringResourceEventHandler{
		FilterFunc: func(obj any) bool { return isMirrored(types.SettingName(objectName(obj))) },
		Handler:    cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, cur any) { enqueue(cur) }, DeleteFunc: enqueue},
	})
	return c
}

func objectName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch o := obj.(type) {
	case *longhorn.BackupTarget:
		return o.Name
	case *longhorn.Setting:
		return o.Name
	}
	return ""
}

func isMirrored(name types.SettingName) bool {
	for _, f := range datastore.BackupTargetFields {
		if f.Setting == name {
			return true
		}
	}
	return false
}

func (c *Controller) key() string { return c.ds.Namespace() + "/" + datastore.DefaultBackupTargetName }

func (c *Controller) settingKey(name types.SettingName) string {
	return c.ds.Namespace() + "/setting/" + string(name)
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	bt, err := c.ds.GetBackupTargetRO(datastore.DefaultBackupTargetName)
	if apierrors.IsNotFound(err) {
		c.written.Forget(key)
		return kit.Result{}, c.createDefault(ctx)
	}
	if err != nil {
		return kit.Result{}, err
	}
	if c.written.Stale(key, bt.ResourceVersion) || !c.ownership.Responsible(bt.Status.OwnerID, "") {
		return kit.Result{}, nil
	}
	log := c.Logger.WithField("backupTarget", bt.Name)
	if claimed, err := c.ownership.Claim(log, bt.Status.OwnerID, func(owner string) error {
		claimed := bt.DeepCopy()
		claimed.Status.OwnerID = owner
		_, err := c.ds.UpdateBackupTargetStatus(ctx, claimed)
		return err
	}); claimed || err != nil {
		return kit.Result{}, err
	}

	settings := map[types.SettingName]setting{}
	cached := map[types.SettingName]*longhorn.Setting{}
	for _, f := range datastore.BackupTargetFields {
		s, err := c.ds.GetSettingRO(f.Setting)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return kit.Result{}, err
		}
		if c.written.Stale(c.settingKey(f.Setting), s.ResourceVersion) {
			return kit.Result{}, nil // the write's event brings the key back
		}
		settings[f.Setting], cached[f.Setting] = setting{value: s.Value, exists: true}, s
	}
	p := decide(settings, bt.Spec, datastore.DecodeBackupTargetAgreement(bt))
	return kit.Result{}, c.apply(ctx, key, bt, cached, p, log)
}

// apply writes the plan: the settings first, then default's spec and
// agreement in one write. Should the second fail, the next sync finds
// both sides equal and records the agreement only.
func (c *Controller) apply(ctx context.Context, key string, bt *longhorn.BackupTarget, cached map[types.SettingName]*longhorn.Setting, p plan, log *logrus.Entry) error {
	if len(p.refused) > 0 {
		err := errors.Join(p.refused...)
		c.recorder.Event(bt, corev1.EventTypeWarning, ReasonInvalidSpec, fmt.Sprintf("not copied to the settings: %v", err))
		log.WithError(err).Warn("A spec field of the default backup target breaks its setting's rule; the settings keep their values")
	}
	for _, f := range datastore.BackupTargetFields {
		v, ok := p.settings[f.Setting]
		if !ok {
			continue
		}
		s := cached[f.Setting].DeepCopy()
		s.Value = v
		stored, err := c.ds.UpdateSetting(ctx, s)
		if err != nil {
			return fmt.Errorf("copy %s into setting %s: %w", f.Path, f.Setting, err)
		}
		c.written.Remember(c.settingKey(f.Setting), stored.ResourceVersion)
		log.WithFields(logrus.Fields{"setting": f.Setting, "value": v}).Info("Copied the default backup target's spec into the setting")
	}
	updated := bt.DeepCopy()
	for _, f := range datastore.BackupTargetFields {
		if v, ok := p.spec[f.Setting]; ok {
			if err := datastore.SetBackupTargetSpecValue(&updated.Spec, f.Setting, v); err != nil {
				return err
			}
			log.WithFields(logrus.Fields{"setting": f.Setting, "value": v}).Info("Copied the setting into the default backup target's spec")
		}
	}
	if maps.Equal(p.agreed, datastore.DecodeBackupTargetAgreement(bt)) && len(p.spec) == 0 {
		return nil
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[datastore.AnnotationBackupTargetAgreed] = datastore.EncodeBackupTargetAgreement(p.agreed)
	stored, err := c.ds.UpdateBackupTarget(ctx, updated)
	if err != nil {
		return fmt.Errorf("update the default backup target: %w", err)
	}
	c.written.Remember(key, stored.ResourceVersion)
	return nil
}

// createDefault makes "default" from the settings, as the upgrade step
// does; another manager making it first is as good.
func (c *Controller) createDefault(ctx context.Context) error {
	values, err := c.ds.BackupTargetSettingValues()
	if err != nil {
		return err
	}
	bt, err := datastore.NewDefaultBackupTarget(values)
	if err != nil {
		return err
	}
	if _, err := c.ds.CreateBackupTarget(ctx, bt); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the default backup target from the settings: %w", err)
	}
	c.Logger.WithField("backupTarget", bt.Name).Info("Made the default backup target from the backup settings")
	return nil
}
