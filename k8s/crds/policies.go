package crds

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Policies returns the ValidatingAdmissionPolicies and their bindings in
// policies/.
func Policies() ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	entries, err := policyFiles.ReadDir("policies")
	if err != nil {
		return nil, nil, err
	}
	var policies []*admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	for _, e := range entries {
		data, err := policyFiles.ReadFile("policies/" + e.Name())
		if err != nil {
			return nil, nil, err
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("read policies/%s: %w", e.Name(), err)
			}
			var meta metav1.TypeMeta
			if err := utilyaml.Unmarshal(doc, &meta); err != nil {
				return nil, nil, fmt.Errorf("decode policies/%s: %w", e.Name(), err)
			}
			switch meta.Kind {
			case "ValidatingAdmissionPolicy":
				p := &admissionv1.ValidatingAdmissionPolicy{}
				err = utilyaml.UnmarshalStrict(doc, p)
				policies = append(policies, p)
			case "ValidatingAdmissionPolicyBinding":
				b := &admissionv1.ValidatingAdmissionPolicyBinding{}
				err = utilyaml.UnmarshalStrict(doc, b)
				bindings = append(bindings, b)
			case "":
				continue
			default:
				err = fmt.Errorf("unexpected kind %s", meta.Kind)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("decode policies/%s: %w", e.Name(), err)
			}
		}
	}
	return policies, bindings, nil
}

// InstallPolicies creates or updates the admission policies and their
// bindings. The apiserver applies a policy a moment after it is written.
func InstallPolicies(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	policies, bindings, err := Policies()
	if err != nil {
		return err
	}
	api := client.AdmissionregistrationV1()
	for _, p := range policies {
		existing, err := api.ValidatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.ValidatingAdmissionPolicies().Create(ctx, p, metav1.CreateOptions{})
		case err == nil:
			p.ResourceVersion = existing.ResourceVersion
			_, err = api.ValidatingAdmissionPolicies().Update(ctx, p, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("install ValidatingAdmissionPolicy %s: %w", p.Name, err)
		}
	}
	for _, b := range bindings {
		existing, err := api.ValidatingAdmissionPolicyBindings().Get(ctx, b.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.ValidatingAdmissionPolicyBindings().Create(ctx, b, metav1.CreateOptions{})
		case err == nil:
			b.ResourceVersion = existing.ResourceVersion
			_, err = api.ValidatingAdmissionPolicyBindings().Update(ctx, b, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("install ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	return nil
}
