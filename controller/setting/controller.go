package setting

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Controller checks every Setting against its definition. A valid
// value is marked applied; an invalid one (written with kubectl, which
// cannot know the rule) is marked not applied, the manager keeps using the
// default, and a Warning event names the rule.
//
// Ownership: none. Every node checks every Setting and would write the
// same status; the writes agree, so no owner is needed.
type Controller struct {
	*kit.Base
	ds       *datastore.DataStore
	recorder record.EventRecorder
}

// NewController wires the controller to the Setting informer.
func NewController(logger *logrus.Entry, metrics *kit.Metrics, ds *datastore.DataStore, inf datastore.Informers, recorder record.EventRecorder) *Controller {
	informer := inf.Longhorn.Longhorn().V1beta2().Settings().Informer()
	c := &Controller{ds: ds, recorder: recorder}
	c.Base = kit.NewBase("longhorn-setting", logger, metrics, c.sync, informer.HasSynced)
	informer.AddEventHandler(c.EventHandler())
	return c
}

func (c *Controller) sync(ctx context.Context, key string) (kit.Result, error) {
	_, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return kit.Result{}, err
	}
	setting, err := c.ds.GetSettingRO(types.SettingName(name))
	if apierrors.IsNotFound(err) {
		return kit.Result{}, nil
	}
	if err != nil {
		return kit.Result{}, err
	}
	if _, known := types.GetSettingDefinition(types.SettingName(name)); !known {
		// Settings of newer or older managers are left alone.
		return kit.Result{}, nil
	}
	verr := types.ValidateSetting(types.SettingName(name), setting.Value)
	if verr != nil {
		// Repeated on every sync while the value stays invalid; the event
		// recorder folds the repeats into one event with a count.
		c.recorder.Event(setting, corev1.EventTypeWarning, "InvalidValue", verr.Error()+"; the default value is used until it is fixed")
	}
	applied := verr == nil
	if setting.Status.Applied == applied {
		return kit.Result{}, nil
	}
	updated := setting.DeepCopy()
	updated.Status.Applied = applied
	if _, err := c.ds.UpdateSettingStatus(ctx, updated); err != nil {
		return kit.Result{}, fmt.Errorf("update status of setting %s: %w", name, err)
	}
	log := c.Logger.WithFields(logrus.Fields{"setting": name, "value": setting.Value})
	if verr != nil {
		log.WithError(verr).Warn("Setting has an invalid value; using its default")
	} else {
		log.Info("Setting applied")
	}
	return kit.Result{}, nil
}
