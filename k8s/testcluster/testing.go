package testcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// shared is the package's cluster, set by Main.
var shared *Cluster

// Main starts a control plane (or connects to the one named by
// LONGHORN_TEST_KUBECONFIG), runs the package's tests and stops it. Its
// result is the exit code for os.Exit.
func Main(m *testing.M) int {
	ctx := context.Background()
	started := time.Now()
	var err error
	if kc := os.Getenv(EnvKubeconfig); kc != "" {
		shared, err = Connect(ctx, kc)
	} else {
		var dir string
		dir, err = os.MkdirTemp("", "longhorn-testcluster-")
		if err == nil {
			defer os.RemoveAll(dir)
			var logFile *os.File
			logFile, err = os.Create(filepath.Join(dir, "controlplane.out"))
			if err == nil {
				defer logFile.Close()
				shared, err = Start(ctx, Options{DataDir: dir, Log: logFile})
			}
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "testcluster: control plane ready in %s\n", time.Since(started).Round(10*time.Millisecond))
	code := m.Run()
	if err := shared.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
	}
	return code
}

// Get returns the package's cluster. The package's TestMain must call Main.
func Get(t testing.TB) *Cluster {
	t.Helper()
	if shared == nil {
		t.Fatal("testcluster.Get: the package's TestMain does not call testcluster.Main")
	}
	return shared
}

// KubeClient returns an admin clientset.
func (c *Cluster) KubeClient(t testing.TB) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// NewNamespace creates a namespace of its own for the test and deletes it
// when the test ends.
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	client := c.KubeClient(t)
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	name := strings.Trim(prefix, "-") + "-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// ServiceAccountConfig returns a config that acts as the service account,
// by impersonation from the admin config, so a test proves that the
// account's RBAC is enough.
func (c *Cluster) ServiceAccountConfig(namespace, name string) *rest.Config {
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}
