package datastore

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// NodeTopology is where a Kubernetes node is: its well-known region and
// zone labels (topology.kubernetes.io/region, .../zone), which Longhorn
// copies into its Node's status for zone anti-affinity.
type NodeTopology struct {
	Region, Zone string
	// Found is false when there is no Kubernetes node of that name (the
	// tests' managers, make run's extra nodes).
	Found bool
}

// KubeNodeTopology reads the Kubernetes node's topology labels. It lists
// by name, the one verb the manager has on nodes (the cluster-ranges
// role).
func (ds *DataStore) KubeNodeTopology(ctx context.Context, name string) (NodeTopology, error) {
	list, err := ds.kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		return NodeTopology{}, fmt.Errorf("read the topology labels of Kubernetes node %s: %w", name, err)
	}
	for _, n := range list.Items {
		if n.Name == name {
			return NodeTopology{Region: n.Labels[corev1.LabelTopologyRegion], Zone: n.Labels[corev1.LabelTopologyZone], Found: true}, nil
		}
	}
	return NodeTopology{}, nil
}
