package datastore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// GetSettingRO returns the cached Setting; the caller must not modify it.
func (ds *DataStore) GetSettingRO(name types.SettingName) (*longhorn.Setting, error) {
	return ds.settingLister.Settings(ds.namespace).Get(string(name))
}

// ListSettingsRO returns every cached Setting; the caller must not modify them.
func (ds *DataStore) ListSettingsRO() ([]*longhorn.Setting, error) {
	return ds.settingLister.Settings(ds.namespace).List(labels.Everything())
}

// GetSettingValue returns a setting's value, or its default when the
// object is missing or holds a value that breaks the setting's rule (the
// setting controller reports those).
func (ds *DataStore) GetSettingValue(name types.SettingName) (string, error) {
	def, ok := types.GetSettingDefinition(name)
	if !ok {
		return "", fmt.Errorf("unknown setting %q", name)
	}
	s, err := ds.GetSettingRO(name)
	if apierrors.IsNotFound(err) {
		return def.Default, nil
	}
	if err != nil {
		return "", err
	}
	if err := types.ValidateSetting(name, s.Value); err != nil {
		// The setting controller reports the invalid value (status and a
		// Warning event); here it is only noted, as reads are frequent.
		logrus.WithField("setting", name).WithError(err).Debug("Using the default value in place of an invalid one")
		return def.Default, nil
	}
	return s.Value, nil
}

// GetSettingAsBool returns a bool setting.
func (ds *DataStore) GetSettingAsBool(name types.SettingName) (bool, error) {
	v, err := ds.GetSettingValue(name)
	if err != nil {
		return false, err
	}
	return strconv.ParseBool(v)
}

// GetSettingAsInt returns an int setting.
func (ds *DataStore) GetSettingAsInt(name types.SettingName) (int, error) {
	v, err := ds.GetSettingValue(name)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(v)
}

// CreateDefaultSettings creates every setting that does not exist yet with
// its default value, or with the value initial gives it (the daemon's
// --default-setting, checked by CheckInitialSettings). Existing settings,
// and the values users gave them, are left alone. It reads through the
// API rather than the cache, because it runs before the informers have
// started: one list, so a restart with every setting in place writes
// nothing.
func (ds *DataStore) CreateDefaultSettings(ctx context.Context, initial map[types.SettingName]string) (created []types.SettingName, err error) {
	client := ds.lhClient.LonghornV1beta2().Settings(ds.namespace)
	existing := map[string]bool{}
	if list, err := client.List(ctx, metav1.ListOptions{}); err == nil {
		for _, s := range list.Items {
			existing[s.Name] = true
		}
	}
	for _, name := range types.SettingNames() {
		if existing[string(name)] {
			continue
		}
		def, _ := types.GetSettingDefinition(name)
		value := def.Default
		if v, ok := initial[name]; ok {
			value = v
		}
		setting := &longhorn.Setting{
			ObjectMeta: metav1.ObjectMeta{Name: string(name)},
			Value:      value,
		}
		_, err := client.Create(ctx, setting, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return created, fmt.Errorf("create default setting %s: %w", name, err)
		}
		created = append(created, name)
	}
	return created, nil
}

// GetSettingFresh reads a Setting from the API, for a read-modify-write.
func (ds *DataStore) GetSettingFresh(ctx context.Context, name types.SettingName) (*longhorn.Setting, error) {
	return ds.lhClient.LonghornV1beta2().Settings(ds.namespace).Get(ctx, string(name), metav1.GetOptions{})
}

// UpdateSetting writes a Setting's value.
func (ds *DataStore) UpdateSetting(ctx context.Context, s *longhorn.Setting) (*longhorn.Setting, error) {
	return ds.lhClient.LonghornV1beta2().Settings(ds.namespace).Update(ctx, s, metav1.UpdateOptions{})
}

// UpdateSettingStatus writes a Setting's status.
func (ds *DataStore) UpdateSettingStatus(ctx context.Context, s *longhorn.Setting) (*longhorn.Setting, error) {
	return ds.lhClient.LonghornV1beta2().Settings(ds.namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
}

// ParseInitialSettings reads name=value pairs (the daemon's
// --default-setting) into the values CreateDefaultSettings gives settings
// it creates; an unknown name or a value that breaks its setting's rule
// is refused, naming it.
func ParseInitialSettings(pairs []string) (map[types.SettingName]string, error) {
	out := map[types.SettingName]string{}
	for _, p := range pairs {
		name, value, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("default setting %q: want name=value", p)
		}
		if err := types.ValidateSetting(types.SettingName(name), value); err != nil {
			return nil, fmt.Errorf("default setting %q: %w", p, err)
		}
		out[types.SettingName(name)] = value
	}
	return out, nil
}
