package datastore

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// GetNodeRO returns the cached Node; the caller must not modify it.
func (ds *DataStore) GetNodeRO(name string) (*longhorn.Node, error) {
	return ds.nodeLister.Nodes(ds.namespace).Get(name)
}

// ListNodesRO returns every cached Node; the caller must not modify them.
func (ds *DataStore) ListNodesRO() ([]*longhorn.Node, error) {
	return ds.nodeLister.Nodes(ds.namespace).List(labels.Everything())
}

// GetNodeFresh reads a Node from the API, for read-modify-write retries.
func (ds *DataStore) GetNodeFresh(ctx context.Context, name string) (*longhorn.Node, error) {
	return ds.lhClient.LonghornV1beta2().Nodes(ds.namespace).Get(ctx, name, metav1.GetOptions{})
}

// CreateNode creates a Node.
func (ds *DataStore) CreateNode(ctx context.Context, node *longhorn.Node) (*longhorn.Node, error) {
	return ds.lhClient.LonghornV1beta2().Nodes(ds.namespace).Create(ctx, node, metav1.CreateOptions{})
}

// UpdateNode writes a Node's spec and metadata.
func (ds *DataStore) UpdateNode(ctx context.Context, node *longhorn.Node) (*longhorn.Node, error) {
	return ds.lhClient.LonghornV1beta2().Nodes(ds.namespace).Update(ctx, node, metav1.UpdateOptions{})
}

// UpdateNodeStatus writes a Node's status.
func (ds *DataStore) UpdateNodeStatus(ctx context.Context, node *longhorn.Node) (*longhorn.Node, error) {
	return ds.lhClient.LonghornV1beta2().Nodes(ds.namespace).UpdateStatus(ctx, node, metav1.UpdateOptions{})
}

// IsNodeUp reports whether the node's manager is running, as its Ready
// condition says. A node that is not registered is not up.
func (ds *DataStore) IsNodeUp(name string) bool {
	node, err := ds.GetNodeRO(name)
	if err != nil {
		return false
	}
	return IsNodeReady(node)
}

// IsNodeReady reports whether a Node's Ready condition is True.
func IsNodeReady(node *longhorn.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == longhorn.ConditionTypeReady {
			return c.Status == longhorn.ConditionStatusTrue
		}
	}
	return false
}
