package datastore

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterNetwork is what a download on a user's behalf may not reach of
// the cluster, as its API tells it, from one list of its Nodes.
type ClusterNetwork struct {
	// Ranges are where the cluster's own pods and services live: every
	// node's spec.podCIDRs and every ServiceCIDR (networking.k8s.io/v1,
	// Kubernetes 1.33 on); a cluster whose API has no ServiceCIDR gives
	// its pod ranges only.
	Ranges []netip.Prefix
	// NodeAddresses are the nodes' internal and external IPs (host names
	// are not addresses), each once.
	NodeAddresses []netip.Addr
}

// ClusterNetwork reads the cluster's network. Entries that do not parse
// are skipped: they come from the cluster, not a user, and one bad entry
// must not hide the others.
func (ds *DataStore) ClusterNetwork(ctx context.Context) (ClusterNetwork, error) {
	var out ClusterNetwork
	add := func(cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			out.Ranges = append(out.Ranges, p.Masked())
		}
	}
	nodes, err := ds.kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return out, fmt.Errorf("list the cluster's nodes for their pod ranges and addresses: %w", err)
	}
	seen := map[netip.Addr]bool{}
	for _, n := range nodes.Items {
		add(n.Spec.PodCIDR)
		for _, cidr := range n.Spec.PodCIDRs {
			add(cidr)
		}
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil && !seen[ip.Unmap()] {
				seen[ip.Unmap()] = true
				out.NodeAddresses = append(out.NodeAddresses, ip.Unmap())
			}
		}
	}
	cidrs, err := ds.kubeClient.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// No ServiceCIDR API in this cluster.
	case err != nil:
		return out, fmt.Errorf("list the cluster's ServiceCIDRs: %w", err)
	default:
		for _, c := range cidrs.Items {
			for _, cidr := range c.Spec.CIDRs {
				add(cidr)
			}
		}
	}
	return out, nil
}
