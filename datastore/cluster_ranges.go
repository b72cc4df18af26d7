package datastore

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterNetworkRanges are the address ranges the cluster's own pods and
// services live in, as its API tells them: every node's spec.podCIDRs and
// every ServiceCIDR (networking.k8s.io/v1, Kubernetes 1.33 on). A
// cluster whose API has no ServiceCIDR gives its pod ranges only. Ranges
// that do not parse are skipped: they come from the cluster, not a user,
// and one bad entry must not hide the others.
func (ds *DataStore) ClusterNetworkRanges(ctx context.Context) ([]netip.Prefix, error) {
	var out []netip.Prefix
	add := func(cidr string) {
		if p, err := netip.ParsePrefix(cidr); err == nil {
			out = append(out, p.Masked())
		}
	}
	nodes, err := ds.kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the cluster's nodes for their pod ranges: %w", err)
	}
	for _, n := range nodes.Items {
		add(n.Spec.PodCIDR)
		for _, cidr := range n.Spec.PodCIDRs {
			add(cidr)
		}
	}
	cidrs, err := ds.kubeClient.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		// No ServiceCIDR API in this cluster.
	case err != nil:
		return nil, fmt.Errorf("list the cluster's ServiceCIDRs: %w", err)
	default:
		for _, c := range cidrs.Items {
			for _, cidr := range c.Spec.CIDRs {
				add(cidr)
			}
		}
	}
	return out, nil
}

// ClusterNodeAddresses are the addresses of the cluster's nodes, as each
// Node's status.addresses gives them (internal and external IPs; host
// names are not addresses). A download may not reach a node unless a
// node is allowed alone (internal/netguard). Addresses that do not parse
// are skipped, as in ClusterNetworkRanges.
func (ds *DataStore) ClusterNodeAddresses(ctx context.Context) ([]netip.Addr, error) {
	nodes, err := ds.kubeClient.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list the cluster's nodes for their addresses: %w", err)
	}
	var out []netip.Addr
	for _, n := range nodes.Items {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out, nil
}
