package framework

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

const ServiceAccount = "longhorn-service-account"

// ReadManifests decodes every object of a YAML file in package/.
func ReadManifests(t testing.TB, name string) []runtime.Object {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "package", name))
	if err != nil {
		t.Fatal(err)
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read package/%s: %v", name, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("decode package/%s: %v", name, err)
		}
		out = append(out, obj)
	}
}

// InstallRBAC applies package/rbac.yaml to namespace, as an admin would to
// longhorn-system.
func InstallRBAC(t testing.TB, client kubernetes.Interface, namespace string) {
	t.Helper()
	InstallRBACIn(t, testcluster.Get(t), client, namespace)
}

// InstallRBACIn is installRBAC on a control plane other than the
// package's: client is an admin client of cluster. files are more RBAC
// manifests of package/ to apply (rbac-api-auth.yaml for a daemon with
// --api-auth=kubernetes).
func InstallRBACIn(t testing.TB, cluster *testcluster.Cluster, client kubernetes.Interface, namespace string, files ...string) {
	t.Helper()
	ctx := context.Background()
	var objs []runtime.Object
	for _, f := range append([]string{"rbac.yaml"}, files...) {
		objs = append(objs, ReadManifests(t, f)...)
	}
	for _, obj := range objs {
		var err error
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			o.Namespace = namespace
			_, err = client.CoreV1().ServiceAccounts(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			o.Namespace = namespace
			_, err = client.RbacV1().Roles(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			o.Namespace = namespace
			for i := range o.Subjects {
				o.Subjects[i].Namespace = namespace
			}
			_, err = client.RbacV1().RoleBindings(namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			// Cluster-wide names are shared by every test namespace.
			o.Name += "-" + namespace
			_, err = client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() { _ = client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		case *rbacv1.ClusterRoleBinding:
			o.Name += "-" + namespace
			o.RoleRef.Name += "-" + namespace
			for i := range o.Subjects {
				o.Subjects[i].Namespace = namespace
			}
			_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			name := o.Name
			t.Cleanup(func() {
				_ = client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
			})
		default:
			t.Fatalf("package/rbac.yaml holds an unexpected %T", obj)
		}
		if err != nil {
			t.Fatalf("apply rbac.yaml: %v", err)
		}
	}
	// The apiserver's authorizer learns of new bindings from a watch: wait
	// until the account can do what the daemon does first, so a test does
	// not race it.
	sa := LHClient(t, cluster.ServiceAccountConfig(namespace, ServiceAccount))
	Eventually(t, 10*time.Second, "the ServiceAccount's RBAC in force", func() (bool, error) {
		_, err := sa.LonghornV1beta2().Settings(namespace).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}
