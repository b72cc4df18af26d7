package crds_test

import (
	"testing"

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
