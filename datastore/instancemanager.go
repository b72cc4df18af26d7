package datastore

import (
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ListInstanceManagersRO lists the nodes' instance managers from the
// cache; do not modify them.
func (ds *DataStore) ListInstanceManagersRO() ([]*longhorn.InstanceManager, error) {
	return ds.instanceManagerLister.InstanceManagers(ds.namespace).List(labels.Everything())
}

// GetInstanceManagerRO returns the instance manager called name from the
// cache; do not modify it.
func (ds *DataStore) GetInstanceManagerRO(name string) (*longhorn.InstanceManager, error) {
	return ds.instanceManagerLister.InstanceManagers(ds.namespace).Get(name)
}
