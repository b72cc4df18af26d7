package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/internal/apiretry"
	"github.com/cadence-storage/longhorn-manager/k8s/crds"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/upgrade/step"
	"github.com/cadence-storage/longhorn-manager/upgrade/upgradetest"
)

// startOwnControlPlane starts a control plane of the test's own in dir
// (not the package's shared one, which other tests use), stopped when the
// test ends.
func startOwnControlPlane(t *testing.T, dir string, asRunStartsIt bool) (*testcluster.Cluster, kubernetes.Interface, lhclientset.Interface) {
	t.Helper()
	logFile, err := os.OpenFile(filepath.Join(dir, "controlplane.out"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cp, err := testcluster.Start(context.Background(), testcluster.Options{DataDir: dir, Log: logFile, AsRunStartsIt: asRunStartsIt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	kube, lh := clientsFor(t, cp.Config)
	return cp, kube, lh
}

func clientsFor(t *testing.T, cfg *rest.Config) (kubernetes.Interface, lhclientset.Interface) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lh, err := lhclientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube, lh
}

// Users upgrade by restarting: the control plane comes back with v1.1's
// objects in etcd, and the manager starts at once and migrates, while
// the apiserver's admission, which has not loaded the CRDs' schemas yet,
// refuses RecurringJob creates for some seconds ("Resource kind ... not
// found"). The migration waits that out instead of failing every start.
func TestMigrationRightAfterAControlPlaneRestart(t *testing.T) {
	testcluster.SkipIfShort(t, "a control plane of its own")
	dir := t.TempDir()
	cp, kube, lh := startOwnControlPlane(t, dir, false)
	ns := "longhorn-system"
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{crds.ManagerNamespaceLabel: "true"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := upgradetest.Create(t, kube, lh, ns)
	if err := cp.Stop(); err != nil {
		t.Fatal(err)
	}

	restarted := time.Now()
	cp, kube, lh = startOwnControlPlane(t, dir, true)
	t.Logf("control plane back in %s", time.Since(restarted).Round(time.Millisecond))
	f.Reconnect(kube, lh)
	var steps []string
	c := step.Clients{Namespace: ns, Kube: kube, Longhorn: lh, Log: quietLog(),
		Retry:     apiretry.Policy{Timeout: 2 * time.Minute},
		AfterStep: func(s string) error { steps = append(steps, s); return nil }}
	start := time.Now()
	if err := Run(context.Background(), c, "node-1"); err != nil {
		t.Fatalf("the migration right after the restart: %v", err)
	}
	t.Logf("migrated in %s (%d steps)", time.Since(start).Round(time.Millisecond), len(steps))
	f.AssertMigrated(t)
}
