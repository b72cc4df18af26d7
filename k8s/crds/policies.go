package crds

import (
	"bufio"
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"slices"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ManagerNamespaceLabel marks the namespace a manager runs in and
// watches (package/namespace.yaml sets it on longhorn-system). The
// mutating admission policies act only there: a finalizer no manager
// removes would keep a deleted object forever.
const ManagerNamespaceLabel = "longhorn.io/manager-namespace"

// Policies returns the ValidatingAdmissionPolicies and their bindings in
// policies/.
func Policies() ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding, error) {
	var policies []*admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	err := decodeDocs(policyFiles, "policies", func(kind string, doc []byte) (err error) {
		switch kind {
		case "ValidatingAdmissionPolicy":
			policies, err = appendDecoded(policies, doc)
		case "ValidatingAdmissionPolicyBinding":
			bindings, err = appendDecoded(bindings, doc)
		default:
			err = fmt.Errorf("unexpected kind %s", kind)
		}
		return err
	})
	return policies, bindings, err
}

// MutatingPolicies returns the MutatingAdmissionPolicies and their
// bindings in admission/.
func MutatingPolicies() ([]*admissionv1.MutatingAdmissionPolicy, []*admissionv1.MutatingAdmissionPolicyBinding, error) {
	var policies []*admissionv1.MutatingAdmissionPolicy
	var bindings []*admissionv1.MutatingAdmissionPolicyBinding
	err := decodeDocs(mutatingFiles, "admission", func(kind string, doc []byte) (err error) {
		switch kind {
		case "MutatingAdmissionPolicy":
			policies, err = appendDecoded(policies, doc)
		case "MutatingAdmissionPolicyBinding":
			bindings, err = appendDecoded(bindings, doc)
		default:
			err = fmt.Errorf("unexpected kind %s", kind)
		}
		return err
	})
	return policies, bindings, err
}

// decodeDocs hands every YAML document of the files in dir to decode,
// with its kind; documents without one (comments only) are skipped.
func decodeDocs(fsys embed.FS, dir string, decode func(kind string, doc []byte) error) error {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := dir + "/" + e.Name()
		data, err := fsys.ReadFile(name)
		if err != nil {
			return err
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("read %s: %w", name, err)
			}
			var meta metav1.TypeMeta
			if err := utilyaml.Unmarshal(doc, &meta); err != nil {
				return fmt.Errorf("decode %s: %w", name, err)
			}
			if meta.Kind == "" {
				continue
			}
			if err := decode(meta.Kind, doc); err != nil {
				return fmt.Errorf("decode %s: %w", name, err)
			}
		}
	}
	return nil
}

// appendDecoded decodes doc strictly (an unknown field is an error, not
// a rule silently dropped) and appends it.
func appendDecoded[T any](list []*T, doc []byte) ([]*T, error) {
	obj := new(T)
	if err := utilyaml.UnmarshalStrict(doc, obj); err != nil {
		return list, err
	}
	return append(list, obj), nil
}

// InstallPolicies creates or updates the admission policies and their
// bindings. The apiserver applies a policy a moment after it is written.
// The mutating ones are installed where the apiserver serves them
// (Kubernetes 1.36 and later); elsewhere the manager does their work.
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
		if err := createOrUpdate(ctx, api.ValidatingAdmissionPolicies(), p); err != nil {
			return fmt.Errorf("install ValidatingAdmissionPolicy %s: %w", p.Name, err)
		}
	}
	for _, b := range bindings {
		if err := createOrUpdate(ctx, api.ValidatingAdmissionPolicyBindings(), b); err != nil {
			return fmt.Errorf("install ValidatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}

	served, err := client.Discovery().ServerResourcesForGroupVersion(admissionv1.SchemeGroupVersion.String())
	if err != nil {
		return fmt.Errorf("discover %s: %w", admissionv1.SchemeGroupVersion, err)
	}
	if !slices.ContainsFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == "mutatingadmissionpolicies" }) {
		return nil
	}
	mutating, mutatingBindings, err := MutatingPolicies()
	if err != nil {
		return err
	}
	for _, p := range mutating {
		if err := createOrUpdate(ctx, api.MutatingAdmissionPolicies(), p); err != nil {
			return fmt.Errorf("install MutatingAdmissionPolicy %s: %w", p.Name, err)
		}
	}
	for _, b := range mutatingBindings {
		if err := createOrUpdate(ctx, api.MutatingAdmissionPolicyBindings(), b); err != nil {
			return fmt.Errorf("install MutatingAdmissionPolicyBinding %s: %w", b.Name, err)
		}
	}
	return nil
}

// objectClient is what createOrUpdate needs of a typed client of
// cluster-scoped objects.
type objectClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

func createOrUpdate[T metav1.Object](ctx context.Context, client objectClient[T], obj T) error {
	existing, err := client.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(existing.GetResourceVersion())
		_, err = client.Update(ctx, obj, metav1.UpdateOptions{})
	}
	return err
}
