package datastore

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// UpdateReplica writes a Replica's spec and metadata.
func (ds *DataStore) UpdateReplica(ctx context.Context, r *longhorn.Replica) (*longhorn.Replica, error) {
	return ds.lhClient.LonghornV1beta2().Replicas(ds.namespace).Update(ctx, r, metav1.UpdateOptions{})
}

// ReplicasNode is the node that holds every one of replicas, or "" when
// there are none or they are on several nodes.
func ReplicasNode(replicas []*longhorn.Replica) string {
	nodes := make([]string, len(replicas))
	for i, r := range replicas {
		nodes[i] = r.Spec.NodeID
	}
	return types.ReplicasNode(nodes)
}

// AttachRefusal says why volume cannot be attached to node, or returns
// nil when it can: the engine runs in the manager of the node it is
// attached to and opens the volume's replicas from that node's disks, so
// a volume attaches only to the node that holds all its replicas (a
// volume with none yet gets them on the node it attaches to).
func AttachRefusal(volume, node string, replicas []*longhorn.Replica) error {
	elsewhere := map[string][]string{}
	for _, r := range replicas {
		if r.Spec.NodeID != node {
			elsewhere[r.Spec.NodeID] = append(elsewhere[r.Spec.NodeID], r.Name)
		}
	}
	if len(elsewhere) == 0 {
		return nil
	}
	nodes := make([]string, 0, len(elsewhere))
	for n := range elsewhere {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	held := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names := elsewhere[n]
		sort.Strings(names)
		held = append(held, fmt.Sprintf("node %q (%s)", n, strings.Join(names, ", ")))
	}
	where := fmt.Sprintf("attach it to %q", nodes[0])
	if len(nodes) > 1 || len(elsewhere[nodes[0]]) < len(replicas) {
		where = "no single node holds them all, so it cannot attach anywhere"
	}
	return fmt.Errorf("volume %s cannot be attached to node %q: its replicas are on %s, and an engine opens only the replicas on its own node's disks; %s",
		volume, node, strings.Join(held, " and "), where)
}
