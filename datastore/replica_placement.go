package datastore

import (
	"context"
	"fmt"
	"slices"
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

// ReplicasNode is the node an engine of the volume of replicas is best
// started on (types.ReplicasNode): the one holding the most of them not
// marked failed, or "" when none is placed.
func ReplicasNode(replicas []*longhorn.Replica) string {
	sorted := slices.Clone(replicas)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	nodes := make([]string, 0, len(sorted))
	for _, r := range sorted {
		if r.Spec.FailedAt == "" && r.DeletionTimestamp == nil {
			nodes = append(nodes, r.Spec.NodeID)
		}
	}
	if len(nodes) == 0 {
		for _, r := range sorted {
			nodes = append(nodes, r.Spec.NodeID)
		}
	}
	return types.ReplicasNode(nodes)
}

// AttachRefusal says why a volume still to be restored or made a clone,
// or a strict-local one, cannot be attached to node, or returns nil when
// it can: its engine writes its replicas from the disks of the node that
// makes it, which holds them all (the scheduler places them there), so it
// attaches only there until it is made (a strict-local one, always).
// Any other volume attaches anywhere, its engine
// reaching the replicas of other nodes over the replica protocol.
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
	return fmt.Errorf("volume %s cannot be attached to node %q: its replicas are on %s, and its engine opens only the replicas on its own node's disks while it is restored or made a clone, or when it is strict-local; %s",
		volume, node, strings.Join(held, " and "), where)
}
