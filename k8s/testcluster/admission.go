package testcluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
)

// admissionProbes are objects whose creation in a manager's namespace the
// mutating admission policies change, and how to tell they did: a
// RecurringJob and a Snapshot get Longhorn's finalizer, a SystemRestore
// its maker as requester.
var admissionProbes = []struct {
	resource, kind string
	spec           map[string]any
	applied        func(*unstructured.Unstructured) bool
}{
	{"recurringjobs", "RecurringJob", map[string]any{"task": "snapshot", "cron": "@hourly", "retain": int64(1), "concurrency": int64(1)}, hasLonghornFinalizer},
	{"snapshots", "Snapshot", map[string]any{"volume": "probe"}, hasLonghornFinalizer},
	{"systemrestores", "SystemRestore", map[string]any{"systemBackup": "probe"}, func(u *unstructured.Unstructured) bool {
		user, _, _ := unstructured.NestedString(u.Object, "spec", "requester", "username")
		return user != ""
	}},
}

func hasLonghornFinalizer(u *unstructured.Unstructured) bool {
	return slices.Contains(u.GetFinalizers(), "longhorn.io")
}

// waitForMutatingPolicies waits until the apiserver applies the mutating
// admission policies. Until it has the schema of a new CRD, a create the
// policies match is refused with 503 ("Resource kind ... not found"), and
// for a moment after a policy is written it is not yet applied; tests
// must not see either. Each probe is a server-side dry run, so nothing
// is stored.
func waitForMutatingPolicies(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	served, err := kube.Discovery().ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1")
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" }) {
		return nil
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ns := "admission-probe-" + rand.String(5)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{crds.ManagerNamespaceLabel: "true"},
	}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) }()

	deadline := time.Now().Add(timeout)
	for _, p := range admissionProbes {
		client := dyn.Resource(schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: p.resource}).Namespace(ns)
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "longhorn.io/v1beta2",
			"kind":       p.kind,
			"metadata":   map[string]any{"name": "probe"},
			"spec":       p.spec,
		}}
		for {
			out, err := client.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil && p.applied(out) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the mutating admission policies were not applied to %s within %s (last answer: %v, object %v)",
					p.resource, timeout, err, objectOf(out))
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func objectOf(obj *unstructured.Unstructured) map[string]any {
	if obj == nil {
		return nil
	}
	return obj.Object
}
