// Package crds holds the CustomResourceDefinitions of Longhorn's types, as
// written by controller-gen from the markers on k8s/pkg/apis (run `make
// generate`), the validating admission policies in policies/ (written by
// hand) for the rules CEL on a CRD cannot express, and the mutating ones
// in admission/ (Kubernetes 1.36 and later), and installs them.
package crds

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io"
	"sort"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
)

//go:embed *.yaml
var files embed.FS

//go:embed policies/*.yaml
var policyFiles embed.FS

//go:embed admission/*.yaml
var mutatingFiles embed.FS

// All returns every CRD, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := files.ReadFile(e.Name())
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := dec.Decode(crd); err == io.EOF {
				break
			} else if err != nil {
				return nil, fmt.Errorf("decode %s: %w", e.Name(), err)
			}
			if crd.Name != "" {
				out = append(out, crd)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Install creates or updates every CRD and waits until each is
// Established, so objects of the types can be created right after, then
// installs the admission policies.
func Install(ctx context.Context, cfg *rest.Config) error {
	if err := installCRDs(ctx, cfg); err != nil {
		return err
	}
	return InstallPolicies(ctx, cfg)
}

func installCRDs(ctx context.Context, cfg *rest.Config) error {
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	all, err := All()
	if err != nil {
		return err
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range all {
		existing, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("install CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range all {
		name := crd.Name
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s did not become Established: %w", name, err)
		}
	}
	return nil
}
