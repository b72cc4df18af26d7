//go:build e2e

package manager

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestPackageManifests: what package/ deploys is accepted by the
// apiserver (a server-side dry run in a test namespace) and holds the
// rules docs/deploying.md states: the namespace admits
// the privileged manager by its Pod Security labels and is labelled for
// the mutating admission policies, the DaemonSet rolls
// one node at a time and runs the recurring-job pods as their own
// account, and NetworkPolicies let only the callers of each port reach
// it.
func TestPackageManifests(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	for _, obj := range framework.ReadManifests(t, "namespace.yaml") {
		n := obj.(*corev1.Namespace)
		if n.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
			t.Errorf("namespace.yaml: enforce label %q", n.Labels["pod-security.kubernetes.io/enforce"])
		}
		// The mutating policies of admission.yaml (installed in the test
		// cluster from k8s/crds/admission) act in the namespaces so labelled.
		if n.Labels[crds.ManagerNamespaceLabel] != "true" {
			t.Errorf("namespace.yaml: no %s label: package/components/mutating-policies/admission.yaml would not act in it", crds.ManagerNamespaceLabel)
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, n, dry); err != nil {
			t.Errorf("namespace.yaml: %v", err)
		}
	}
	for _, obj := range framework.ReadManifests(t, "longhorn-manager.yaml") {
		var err error
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			o.Namespace = ns
			if u := o.Spec.UpdateStrategy.RollingUpdate; u == nil || u.MaxUnavailable == nil || *u.MaxUnavailable != intstr.FromInt32(1) {
				t.Errorf("the DaemonSet does not roll one node at a time: %+v", o.Spec.UpdateStrategy)
			}
			args := strings.Join(o.Spec.Template.Spec.Containers[0].Command, " ")
			if !strings.Contains(args, "--recurring-job-service-account=longhorn-recurring-job") {
				t.Errorf("the recurring-job pods do not run as their own account: %s", args)
			}
			// The API is closed as deployed: every caller needs a token and
			// the RBAC right (issue: the default was --api-auth=none).
			if !slices.Contains(o.Spec.Template.Spec.Containers[0].Command, "--api-auth=kubernetes") {
				t.Errorf("the manager does not run --api-auth=kubernetes as deployed: %s", args)
			}
			_, err = kube.AppsV1().DaemonSets(ns).Create(ctx, o, dry)
		case *corev1.Service:
			o.Namespace = ns
			_, err = kube.CoreV1().Services(ns).Create(ctx, o, dry)
		default:
			t.Errorf("longhorn-manager.yaml holds an unexpected %T", obj)
		}
		if err != nil {
			t.Errorf("longhorn-manager.yaml: %v", err)
		}
	}
	// The UI: Longhorn's files served by `longhorn-manager ui`, which
	// passes the browser's own token and, as deployed, sends none of its
	// own (issue: it replaced every browser's token with its account's).
	for _, obj := range framework.ReadManifests(t, "longhorn-ui.yaml") {
		var err error
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Namespace = ns
			spec := o.Spec.Template.Spec
			if spec.ServiceAccountName != "longhorn-ui" {
				t.Errorf("the UI runs as %q, not its own account longhorn-ui", spec.ServiceAccountName)
			}
			cmd := spec.Containers[0].Command
			if len(cmd) < 2 || cmd[0] != "longhorn-manager" || cmd[1] != "ui" || slices.ContainsFunc(cmd, func(a string) bool {
				return strings.HasPrefix(a, "--token-file")
			}) {
				t.Errorf("the UI's server is not `longhorn-manager ui` passing the browser's token: %q", cmd)
			}
			if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
				t.Errorf("the UI's pods may run as root")
			}
			_, err = kube.AppsV1().Deployments(ns).Create(ctx, o, dry)
		case *corev1.Service:
			o.Namespace = ns
			_, err = kube.CoreV1().Services(ns).Create(ctx, o, dry)
		default:
			t.Errorf("longhorn-ui.yaml holds an unexpected %T", obj)
		}
		if err != nil {
			t.Errorf("longhorn-ui.yaml: %v", err)
		}
	}
	ports := map[string][]int32{}
	for _, obj := range framework.ReadManifests(t, "networkpolicy.yaml") {
		p, ok := obj.(*networkingv1.NetworkPolicy)
		if !ok {
			t.Fatalf("networkpolicy.yaml holds an unexpected %T", obj)
		}
		p.Namespace = ns
		if _, err := kube.NetworkingV1().NetworkPolicies(ns).Create(ctx, p, dry); err != nil {
			t.Errorf("networkpolicy.yaml %s: %v", p.Name, err)
		}
		for _, rule := range p.Spec.Ingress {
			if len(rule.From) == 0 {
				t.Errorf("%s lets anyone reach %v", p.Name, rule.Ports)
			}
			for _, port := range rule.Ports {
				ports[p.Name] = append(ports[p.Name], port.Port.IntVal)
			}
		}
	}
	for name, want := range map[string][]int32{
		"longhorn-manager": {9500, 9502, 9501}, "longhorn-backing-image-manager": {8000}, "longhorn-backing-image-data-source": {8001},
		"longhorn-ui": {8000},
	} {
		if got := ports[name]; len(got) != len(want) || got[0] != want[0] {
			t.Errorf("NetworkPolicy %s covers ports %v, want %v", name, got, want)
		}
	}
}
