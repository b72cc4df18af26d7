package testcluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/k8s/crds"
)

// shared is the package's cluster, set by Main.
var shared *Cluster

// Main starts a control plane (or connects to the one named by
// LONGHORN_TEST_KUBECONFIG), runs the package's tests and stops it. Its
// result is the exit code for os.Exit.
func Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		// The fast tier: no control plane; Get skips the tests that
		// need one.
		return m.Run()
	}
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
	SkipIfShort(t, "a control plane")
	if shared == nil {
		t.Fatal("testcluster.Get: the package's TestMain does not call testcluster.Main")
	}
	return shared
}

// SkipIfShort skips a test that needs what `go test -short`, the fast
// tier, does not set up: a control plane, a real S3 server, a browser,
// Debian's tools or root's mounts.
func SkipIfShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("needs %s: not in the fast tier (-short)", needs)
	}
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
// when the test ends. It is labelled as package/namespace.yaml labels
// longhorn-system, so the mutating admission policies act in it (a
// RecurringJob is created with Longhorn's finalizer).
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	return c.newNamespace(t, map[string]string{crds.ManagerNamespaceLabel: "true"})
}

// NewPlainNamespace is NewNamespace without the manager namespace's
// label: the mutating admission policies leave its objects as created,
// as in a namespace no manager watches.
func (c *Cluster) NewPlainNamespace(t testing.TB) string {
	t.Helper()
	return c.newNamespace(t, nil)
}

func (c *Cluster) newNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	client := c.KubeClient(t)
	prefix := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(prefix) > 40 {
		prefix = prefix[:40]
	}
	name := strings.Trim(prefix, "-") + "-" + rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
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

// Kubectl runs bin/kubectl against the cluster and returns its standard
// output; standard input is stdin when not empty. The test fails when
// kubectl does.
func (c *Cluster) Kubectl(t testing.TB, stdin string, args ...string) string {
	t.Helper()
	out, err := c.TryKubectl(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TryKubectl runs bin/kubectl and returns its output, or an error with
// what it printed on standard error.
func (c *Cluster) TryKubectl(stdin string, args ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	kubectl := filepath.Join(root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return "", fmt.Errorf("%s is missing: run scripts/build-controlplane.sh", kubectl)
	}
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}
