package csi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// TestPackageStorageClassParameters: the `longhorn` StorageClass of
// package/csi.yaml is one this driver takes: its parameters, and those the
// external-provisioner adds with --extra-create-metadata, pass
// CreateVolume's parsing, and the recurringJobSelector example in its
// comment does too once uncommented.
func TestPackageStorageClassParameters(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "package", "csi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sc *storagev1.StorageClass
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode package/csi.yaml: %v", err)
		}
		if s, ok := obj.(*storagev1.StorageClass); ok {
			sc = s
		}
	}
	if sc == nil {
		t.Fatal("package/csi.yaml has no StorageClass")
	}
	params := map[string]string{
		"csi.storage.k8s.io/pvc/name": "data", "csi.storage.k8s.io/pvc/namespace": "default", "csi.storage.k8s.io/pv/name": "pvc-1",
	}
	for k, v := range sc.Parameters {
		params[k] = v
	}
	p, err := parseParams(params)
	if err != nil {
		t.Fatalf("the StorageClass's parameters are refused: %v", err)
	}
	if p.create.NumberOfReplicas == 0 || p.fsType != "ext4" {
		t.Errorf("parsed %+v, fsType %q: want numberOfReplicas and fsType ext4", p.create, p.fsType)
	}

	// The commented example.
	const prefix = "# recurringJobSelector: "
	var example string
	for _, line := range strings.Split(string(data), "\n") {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, prefix) {
			example = l[len("# "):]
		}
	}
	if example == "" {
		t.Fatal("package/csi.yaml shows no recurringJobSelector example")
	}
	var uncommented map[string]string
	if err := yaml.Unmarshal([]byte(example), &uncommented); err != nil {
		t.Fatalf("the example %q is not YAML: %v", example, err)
	}
	p, err = parseParams(uncommented)
	if err != nil {
		t.Fatalf("the example %q is refused: %v", example, err)
	}
	if len(p.create.RecurringJobSelector) == 0 {
		t.Errorf("the example %q selects nothing", example)
	}
}
