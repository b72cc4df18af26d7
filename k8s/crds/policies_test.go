package crds_test

import (
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
)

func TestEveryPolicyHasABindingAndEveryBindingAPolicy(t *testing.T) {
	policies, bindings, err := crds.Policies()
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) == 0 {
		t.Fatal("no admission policy in k8s/crds/policies")
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		bound[b.Spec.PolicyName] = true
	}
	names := map[string]bool{}
	for _, p := range policies {
		names[p.Name] = true
		if !bound[p.Name] {
			t.Errorf("policy %s has no binding: it would check nothing", p.Name)
		}
		for _, v := range p.Spec.Validations {
			if v.Message == "" && v.MessageExpression == "" {
				t.Errorf("policy %s: rule %q has no message", p.Name, v.Expression)
			}
		}
	}
	for name := range bound {
		if !names[name] {
			t.Errorf("a binding names policy %s, which does not exist", name)
		}
	}
}

// TestMutatingPoliciesActOnlyInTheManagersNamespace: every mutating
// policy is bound, and only in namespaces labelled as a manager's (the
// label package/namespace.yaml sets): a finalizer added where no manager
// runs would keep a deleted object forever. A policy that fails leaves
// the object as created, for the manager to finish.
func TestMutatingPoliciesActOnlyInTheManagersNamespace(t *testing.T) {
	policies, bindings, err := crds.MutatingPolicies()
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) == 0 {
		t.Fatal("no mutating admission policy in k8s/crds/admission")
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		bound[b.Spec.PolicyName] = true
		sel := b.Spec.MatchResources
		if sel == nil || sel.NamespaceSelector == nil || len(sel.NamespaceSelector.MatchExpressions) != 0 ||
			len(sel.NamespaceSelector.MatchLabels) != 1 || sel.NamespaceSelector.MatchLabels[crds.ManagerNamespaceLabel] != "true" {
			t.Errorf("binding %s does not select exactly the namespaces labelled %s=true: %+v", b.Name, crds.ManagerNamespaceLabel, sel)
		}
	}
	for _, p := range policies {
		if !bound[p.Name] {
			t.Errorf("mutating policy %s has no binding: it would change nothing", p.Name)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionv1.Ignore {
			t.Errorf("mutating policy %s: failurePolicy %v, want Ignore (the manager does the policy's work when it does not)", p.Name, p.Spec.FailurePolicy)
		}
		for _, r := range p.Spec.MatchConstraints.ResourceRules {
			if !slices.Equal(r.APIGroups, []string{"longhorn.io"}) || !slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Create}) {
				t.Errorf("mutating policy %s acts on %v %v; only the creation of Longhorn's objects is meant", p.Name, r.APIGroups, r.Operations)
			}
		}
	}
}
