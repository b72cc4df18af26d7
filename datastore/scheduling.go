package datastore

import (
	"github.com/cadence-storage/longhorn-manager/scheduler"
	"github.com/cadence-storage/longhorn-manager/types"
)

// SchedulingSettings reads the settings replicas are placed by
// (scheduler.Settings).
func (ds *DataStore) SchedulingSettings() (scheduler.Settings, error) {
	var s scheduler.Settings
	for _, b := range []struct {
		name types.SettingName
		to   *bool
	}{
		{types.SettingNameReplicaSoftAntiAffinity, &s.NodeSoft},
		{types.SettingNameReplicaZoneSoftAntiAffinity, &s.ZoneSoft},
		{types.SettingNameReplicaDiskSoftAntiAffinity, &s.DiskSoft},
	} {
		v, err := ds.GetSettingAsBool(b.name)
		if err != nil {
			return s, err
		}
		*b.to = v
	}
	for _, i := range []struct {
		name types.SettingName
		to   *int
	}{
		{types.SettingNameStorageOverProvisioningPercentage, &s.OverProvisioningPercent},
		{types.SettingNameStorageMinimalAvailablePercentage, &s.MinimalAvailablePercent},
	} {
		v, err := ds.GetSettingAsInt(i.name)
		if err != nil {
			return s, err
		}
		*i.to = v
	}
	return s, nil
}
