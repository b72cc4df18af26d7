//go:build e2e

package manager

import (
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// policyAdmitsPeer says whether p, in namespace policyNS, lets a pod with
// podLabels in namespace ns (with nsLabels) reach port, as a network
// plugin reads the rules: a peer without namespaceSelector is the
// policy's own namespace, {} every namespace.
func policyAdmitsPeer(p *networkingv1.NetworkPolicy, policyNS string, port int32, ns string, nsLabels, podLabels map[string]string) bool {
	for _, rule := range p.Spec.Ingress {
		if !slices.ContainsFunc(rule.Ports, func(rp networkingv1.NetworkPolicyPort) bool { return rp.Port != nil && rp.Port.IntVal == port }) {
			continue
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				continue
			}
			if peer.NamespaceSelector == nil {
				if ns != policyNS {
					continue
				}
			} else if sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err != nil || !sel.Matches(labels.Set(nsLabels)) {
				continue
			}
			if peer.PodSelector != nil {
				if sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err != nil || !sel.Matches(labels.Set(podLabels)) {
					continue
				}
			}
			return true
		}
	}
	return false
}

// A tenant's pod reaches neither the API nor the metrics, whatever labels
// it gives itself (issue: the NetworkPolicy admitted any namespace by a
// pod label); Prometheus in the monitoring namespace reaches the metrics
// port only; the UI and the managers reach the API.
func TestNetworkPolicyKeepsTenantsOffTheAPI(t *testing.T) {
	var manager *networkingv1.NetworkPolicy
	for _, obj := range framework.ReadManifests(t, "networkpolicy.yaml") {
		if p, ok := obj.(*networkingv1.NetworkPolicy); ok && p.Name == "longhorn-manager" {
			manager = p
		}
	}
	if manager == nil {
		t.Fatal("networkpolicy.yaml has no longhorn-manager policy")
	}
	const lh = "longhorn-system"
	ns := func(name string) map[string]string { return map[string]string{"kubernetes.io/metadata.name": name} }
	prometheus := map[string]string{"app.kubernetes.io/name": "prometheus"}
	for _, tc := range []struct {
		name      string
		port      int32
		namespace string
		pod       map[string]string
		want      bool
	}{
		{"a tenant's pod labelled as Prometheus, to the API", 9500, "tenant", prometheus, false},
		{"a tenant's pod labelled as Prometheus, to the metrics", 9502, "tenant", prometheus, false},
		{"a tenant's pod labelled as the UI, to the API", 9500, "tenant", map[string]string{"app": "longhorn-ui"}, false},
		{"a tenant's pod labelled as a manager, to the engines", 9501, "tenant", map[string]string{"app": "longhorn-manager"}, false},
		{"Prometheus in monitoring, to the metrics", 9502, "monitoring", prometheus, true},
		{"Prometheus in monitoring, to the API", 9500, "monitoring", prometheus, false},
		{"the UI, to the API", 9500, lh, map[string]string{"app": "longhorn-ui"}, true},
		{"a manager, to the API", 9500, lh, map[string]string{"app": "longhorn-manager"}, true},
	} {
		if got := policyAdmitsPeer(manager, lh, tc.port, tc.namespace, ns(tc.namespace), tc.pod); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
	// The UI is reached through the login in front of it: only the
	// ingress controller's pods may, not any pod of its namespace (issue:
	// the policy admitted the whole namespace).
	var ui *networkingv1.NetworkPolicy
	for _, obj := range framework.ReadManifests(t, "networkpolicy.yaml") {
		if p, ok := obj.(*networkingv1.NetworkPolicy); ok && p.Name == "longhorn-ui" {
			ui = p
		}
	}
	if ui == nil {
		t.Fatal("networkpolicy.yaml has no longhorn-ui policy: any pod reaches the UI, and through it the API as the UI")
	}
	controller := map[string]string{"app.kubernetes.io/name": "ingress-nginx"}
	for _, tc := range []struct {
		name      string
		namespace string
		pod       map[string]string
		want      bool
	}{
		{"a tenant's pod, to the UI", "tenant", map[string]string{"app": "web"}, false},
		{"a tenant's pod labelled as the ingress controller, to the UI", "tenant", controller, false},
		{"a pod of the manager's namespace, to the UI", lh, map[string]string{"app": "longhorn-manager"}, false},
		{"the ingress controller, to the UI", "ingress-nginx", controller, true},
		{"another pod of the ingress controller's namespace, to the UI", "ingress-nginx", map[string]string{"app": "default-backend"}, false},
	} {
		if got := policyAdmitsPeer(ui, lh, 8000, tc.namespace, ns(tc.namespace), tc.pod); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
}
