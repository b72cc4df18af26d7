//go:build e2e

package manager

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// kustomize builds a kustomization with bin/kubectl's kustomize, as
// `kubectl apply -k` does, and returns its objects.
func kustomize(t *testing.T, dir string) []unstructured.Unstructured {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("%s is missing: run scripts/build-controlplane.sh", kubectl)
	}
	out, err := exec.Command(kubectl, "kustomize", dir).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("kubectl kustomize %s: %v: %s", dir, err, exit.Stderr)
		}
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

func decodeObjects(t *testing.T, data []byte) []unstructured.Unstructured {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) > 0 {
			objs = append(objs, unstructured.Unstructured{Object: obj})
		}
	}
}

func objectKeys(objs []unstructured.Unstructured) []string {
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	slices.Sort(keys)
	return keys
}

// TestPackageKustomization: `kubectl apply -k package/` installs every
// plain manifest of package/ (a file added there and not to the
// kustomization would be left out of the install) and none of the
// components' or the values', and kubectl's kustomize sorts the Namespace
// and the CRDs before what uses them.
func TestPackageKustomization(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "package", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want []unstructured.Unstructured
	for _, f := range files {
		switch filepath.Base(f) {
		case "kustomization.yaml", "install-values.yaml":
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, decodeObjects(t, data)...)
	}
	got := kustomize(t, filepath.Join(root, "package"))
	if g, w := objectKeys(got), objectKeys(want); !slices.Equal(g, w) {
		t.Errorf("kubectl kustomize package/ gives %d objects, package/*.yaml hold %d:\n got %v\nwant %v", len(g), len(w), g, w)
	}
	order := map[string]int{}
	for i, o := range got {
		if _, seen := order[o.GetKind()]; !seen {
			order[o.GetKind()] = i
		}
	}
	for _, kind := range []string{"DaemonSet", "Deployment", "Role", "ValidatingAdmissionPolicy"} {
		if order["Namespace"] > order[kind] || order["CustomResourceDefinition"] > order[kind] {
			t.Errorf("the Namespace (%d) and the CRDs (%d) do not come before the first %s (%d)", order["Namespace"], order["CustomResourceDefinition"], kind, order[kind])
		}
	}
}

// TestPackageInstallValues: a user's kustomization that lists its own
// install-values.yaml and components/install-values moves every host
// folder of the manifests (a field added with a default path and no
// replacement would keep it), and its images: rename every container of
// the manager's image; the values' ConfigMap is not installed.
func TestPackageInstallValues(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel, err := filepath.Rel(dir, filepath.Join(root, "package"))
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile(filepath.Join(root, "package", "install-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := map[string]string{
		"dataPath:":       "/var/lib/longhorn",
		"kubeletRootDir:": "/var/lib/kubelet",
		"csiStatePath:":   "/var/lib/longhorn-csi",
	}
	moved := map[string]string{
		"/var/lib/longhorn":     "/mnt/disk1/longhorn",
		"/var/lib/kubelet":      "/var/lib/rancher/k3s/agent/kubelet",
		"/var/lib/longhorn-csi": "/mnt/disk1/longhorn-csi",
	}
	lines := strings.Split(string(values), "\n")
	for i, line := range lines {
		for key, def := range defaults {
			if strings.TrimSpace(line) == key+" "+def {
				lines[i] = strings.Replace(line, def, moved[def], 1)
				delete(defaults, key)
			}
		}
	}
	if len(defaults) > 0 {
		t.Fatalf("package/install-values.yaml does not hold the defaults %v", defaults)
	}
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "\n  - install-values.yaml\n" +
		"components:\n  - " + rel + "/components/install-values\n" +
		"images:\n  - {name: longhorn-manager, newName: registry.example.com/storage/longhorn-manager, newTag: v1.2.3}\n"
	for name, data := range map[string]string{"install-values.yaml": strings.Join(lines, "\n"), "kustomization.yaml": kustomization} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := kustomize(t, dir)
	for _, o := range got {
		if o.GetName() == "longhorn-install-values" {
			t.Errorf("the values' ConfigMap is installed: it is local-config")
		}
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		for def, to := range moved {
			// A default path followed by the end of the value or a "/":
			// /var/lib/longhorn-csi is not /var/lib/longhorn.
			rest := strings.ReplaceAll(text, to, "")
			if slices.ContainsFunc([]string{"\n", "/", "\"", " "}, func(end string) bool { return strings.Contains(rest, def+end) }) {
				t.Errorf("%s %s still names %s after install-values moved it to %s", o.GetKind(), o.GetName(), def, to)
			}
		}
		if strings.Contains(text, "image: longhorn-manager:") {
			t.Errorf("%s %s runs longhorn-manager:dev after images: renamed it", o.GetKind(), o.GetName())
		}
	}
	for _, o := range got {
		if o.GetKind() != "DaemonSet" {
			continue
		}
		data, _ := yaml.Marshal(o.Object)
		for _, to := range moved {
			if !strings.Contains(string(data), to) {
				t.Errorf("the DaemonSet does not name %s", to)
			}
		}
	}
}
