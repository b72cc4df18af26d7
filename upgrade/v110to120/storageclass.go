package v110to120

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
)

const (
	// Provisioner is Longhorn's CSI driver.
	Provisioner = "driver.longhorn.io"
	// StorageClassConfigMap holds the YAML of Longhorn's default StorageClass.
	StorageClassConfigMap = "longhorn-storageclass"
	storageClassKey       = "storageclass.yaml"

	paramRecurringJobs        = "recurringJobs"
	paramRecurringJobSelector = "recurringJobSelector"

	// backupPrefix names the ConfigMaps that hold a StorageClass while it
	// is re-created: its parameters cannot change in place, and a crash
	// between the delete and the create must not lose it.
	backupPrefix = "longhorn-manager-upgrade-sc-"
	backupKey    = "storageclass.json"
)

// convertParameters turns the recurringJobs parameter into RecurringJobs
// and a recurringJobSelector. It reports false when there is nothing to do.
func convertParameters(ctx context.Context, c step.Clients, owner string, params map[string]string) (map[string]string, bool, error) {
	raw, ok := params[paramRecurringJobs]
	if !ok {
		return params, false, nil
	}
	var entries []longhorn.VolumeRecurringJobSpec
	if err := yaml.Unmarshal([]byte(raw), &entries); err != nil {
		return nil, false, fmt.Errorf("%s: parameter recurringJobs is not a YAML or JSON list of jobs: %w", owner, err)
	}
	selector, err := datastore.ParseRecurringJobSelector(params[paramRecurringJobSelector])
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", owner, err)
	}
	have := map[string]bool{}
	for _, item := range selector {
		have[item.LabelKey()] = true
	}
	for _, entry := range entries {
		name, err := ensureJob(ctx, c, entry)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", owner, err)
		}
		item := datastore.RecurringJobSelectorItem{Name: name}
		if !have[item.LabelKey()] {
			have[item.LabelKey()] = true
			selector = append(selector, item)
		}
	}
	out := make(map[string]string, len(params))
	for k, v := range params {
		out[k] = v
	}
	delete(out, paramRecurringJobs)
	data, err := json.Marshal(selector)
	if err != nil {
		return nil, false, err
	}
	out[paramRecurringJobSelector] = string(data)
	return out, true, nil
}

// migrateStorageClasses re-creates every Longhorn StorageClass that has the
// recurringJobs parameter. A class being re-created is kept in a backup
// ConfigMap first, so a crash after its delete re-creates it on the next
// run rather than losing it.
func migrateStorageClasses(ctx context.Context, c step.Clients) error {
	if err := finishInterruptedStorageClasses(ctx, c); err != nil {
		return err
	}
	var classes *storagev1.StorageClassList
	err := c.Call(ctx, "list StorageClasses", func(ctx context.Context) (err error) {
		classes, err = c.Kube.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		return err
	})
	if apierrors.IsForbidden(err) {
		// The cluster-wide right is package/components/upgrade-from-v1.1/rbac-upgrade-storageclasses.yaml's,
		// applied only for this upgrade. Without it the classes stay as
		// they are and lose nothing: the CSI driver reads their
		// recurringJobs parameter itself when it provisions a volume.
		if c.Log != nil {
			c.Log.WithError(err).Warn("StorageClasses not rewritten: the manager may not list them. Only an upgrade from v1.1 needs to " +
				"(apply package/components/upgrade-from-v1.1/rbac-upgrade-storageclasses.yaml for it); a class left with recurringJobs keeps working, the CSI driver reads that parameter itself")
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("list StorageClasses: %w", err)
	}
	for i := range classes.Items {
		sc := &classes.Items[i]
		if sc.Provisioner != Provisioner {
			continue
		}
		params, changed, err := convertParameters(ctx, c, "StorageClass "+sc.Name, sc.Parameters)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		replacement := sc.DeepCopy()
		replacement.ObjectMeta = metav1.ObjectMeta{Name: sc.Name, Labels: sc.Labels, Annotations: sc.Annotations}
		replacement.Parameters = params
		data, err := json.Marshal(replacement)
		if err != nil {
			return err
		}
		backup := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: backupPrefix + sc.Name, Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
			Data:       map[string]string{backupKey: string(data)},
		}
		err = c.Call(ctx, "create ConfigMap "+backup.Name, func(ctx context.Context) error {
			_, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Create(ctx, backup, metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("StorageClass %s: keep it in ConfigMap %s while it is re-created: %w", sc.Name, backup.Name, err)
		}
		if err := c.Step("backup storageclass " + sc.Name); err != nil {
			return err
		}
		if err := replaceStorageClass(ctx, c, backup); err != nil {
			return err
		}
	}
	return nil
}

// finishInterruptedStorageClasses completes re-creations a crash cut short.
func finishInterruptedStorageClasses(ctx context.Context, c step.Clients) error {
	var cms *corev1.ConfigMapList
	err := c.Call(ctx, "list upgrade ConfigMaps", func(ctx context.Context) (err error) {
		cms, err = c.Kube.CoreV1().ConfigMaps(c.Namespace).List(ctx, metav1.ListOptions{LabelSelector: types.LabelManagedBy + "=" + types.ManagedByValue})
		return err
	})
	if err != nil {
		return fmt.Errorf("list upgrade ConfigMaps: %w", err)
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if len(cm.Name) > len(backupPrefix) && cm.Name[:len(backupPrefix)] == backupPrefix {
			if err := replaceStorageClass(ctx, c, cm); err != nil {
				return err
			}
		}
	}
	return nil
}

// replaceStorageClass makes the class the backup describes exist, replacing
// an old one that still has the recurringJobs parameter, then drops the
// backup.
func replaceStorageClass(ctx context.Context, c step.Clients, backup *corev1.ConfigMap) error {
	replacement := &storagev1.StorageClass{}
	if err := json.Unmarshal([]byte(backup.Data[backupKey]), replacement); err != nil {
		return fmt.Errorf("ConfigMap %s does not hold a StorageClass: %w", backup.Name, err)
	}
	classes := c.Kube.StorageV1().StorageClasses()
	var live *storagev1.StorageClass
	err := c.Call(ctx, "get StorageClass "+replacement.Name, func(ctx context.Context) (err error) {
		live, err = classes.Get(ctx, replacement.Name, metav1.GetOptions{})
		return err
	})
	create := false
	switch {
	case apierrors.IsNotFound(err):
		create = true
	case err != nil:
		return fmt.Errorf("StorageClass %s: %w", replacement.Name, err)
	case live.Parameters[paramRecurringJobs] != "":
		err := c.Call(ctx, "delete StorageClass "+replacement.Name, func(ctx context.Context) error {
			return classes.Delete(ctx, replacement.Name, metav1.DeleteOptions{})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("StorageClass %s: delete it to re-create it: %w", replacement.Name, err)
		}
		if err := c.Step("delete storageclass " + replacement.Name); err != nil {
			return err
		}
		create = true
	}
	if create {
		err := c.Call(ctx, "create StorageClass "+replacement.Name, func(ctx context.Context) error {
			_, err := classes.Create(ctx, replacement, metav1.CreateOptions{})
			return err
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("StorageClass %s: re-create it (its definition is kept in ConfigMap %s): %w", replacement.Name, backup.Name, err)
		}
		c.Log.WithField("storageClass", replacement.Name).Info("Re-created StorageClass with a recurringJobSelector")
		if err := c.Step("create storageclass " + replacement.Name); err != nil {
			return err
		}
	}
	err = c.Call(ctx, "delete ConfigMap "+backup.Name, func(ctx context.Context) error {
		return c.Kube.CoreV1().ConfigMaps(c.Namespace).Delete(ctx, backup.Name, metav1.DeleteOptions{})
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ConfigMap %s: %w", backup.Name, err)
	}
	return c.Step("drop storageclass backup " + replacement.Name)
}

// migrateStorageClassConfigMap rewrites the default StorageClass YAML kept
// in the longhorn-storageclass ConfigMap, in one write.
func migrateStorageClassConfigMap(ctx context.Context, c step.Clients) error {
	var cm *corev1.ConfigMap
	err := c.Call(ctx, "get ConfigMap "+StorageClassConfigMap, func(ctx context.Context) (err error) {
		cm, err = c.Kube.CoreV1().ConfigMaps(c.Namespace).Get(ctx, StorageClassConfigMap, metav1.GetOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ConfigMap %s: %w", StorageClassConfigMap, err)
	}
	raw, ok := cm.Data[storageClassKey]
	if !ok {
		return nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil {
		return fmt.Errorf("ConfigMap %s: %s is not YAML: %w", StorageClassConfigMap, storageClassKey, err)
	}
	rawParams, _ := doc["parameters"].(map[string]any)
	params := map[string]string{}
	for k, v := range rawParams {
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("ConfigMap %s: parameter %s must be a string", StorageClassConfigMap, k)
		}
		params[k] = s
	}
	converted, changed, err := convertParameters(ctx, c, "ConfigMap "+StorageClassConfigMap, params)
	if err != nil || !changed {
		return err
	}
	doc["parameters"] = converted
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	cm.Data[storageClassKey] = string(out)
	err = c.Call(ctx, "update ConfigMap "+StorageClassConfigMap, func(ctx context.Context) error {
		_, err := c.Kube.CoreV1().ConfigMaps(c.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("update ConfigMap %s: %w", StorageClassConfigMap, err)
	}
	c.Log.WithField("configMap", StorageClassConfigMap).Info("Default StorageClass now uses a recurringJobSelector")
	return c.Step("update configmap " + StorageClassConfigMap)
}
