//go:build e2enode

package install

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// namespace is where package/ installs the manager.
const namespace = "longhorn-system"

// sidecars are the CSI sidecars package/csi.yaml runs, whose images
// scripts/build-images.sh --sidecars makes under the names it pulls.
var sidecars = []string{"csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter"}

// uiDist is Longhorn's built UI beside the repository, which the
// longhorn-ui image holds; where it is not, the UI is left out.
const uiDist = "../shared/longhorn-ui/dist"

// imageArchives are the OCI archives of scripts/build-images.sh
// --sidecars that package/ runs: the manager's, the UI's and the
// sidecars'. A missing one fails the test, saying how to build it, but
// for the UI's where Longhorn's built UI is not beside the repository
// (withUI false: the browser test skips there too).
func imageArchives(t *testing.T, root string) (archives []string, withUI bool) {
	t.Helper()
	dir := filepath.Join(root, "bin", "images")
	_, err := os.Stat(filepath.Join(root, uiDist, "index.html"))
	withUI = err == nil
	want := append([]string{"longhorn-manager_dev"}, sidecars...)
	if withUI {
		want = append(want, "longhorn-ui_dev")
	}
	var missing []string
	for _, name := range want {
		found, _ := filepath.Glob(filepath.Join(dir, "*"+name+"*.oci.tar"))
		if len(found) != 1 {
			missing = append(missing, name)
			continue
		}
		archives = append(archives, found[0])
	}
	if len(missing) > 0 {
		t.Fatalf("the images %v are not in %s: run `sudo bash scripts/build-images.sh --sidecars` (scripts/test.sh does, as root)", missing, dir)
	}
	return archives, withUI
}

// installation is what the test's own kustomization sets: the node's
// folders elsewhere than the defaults, as a user of k3s or of a second
// disk would.
type installation struct {
	dir            string // the kustomization
	withUI         bool   // the UI's image is there (imageArchives)
	dataPath       string
	kubeletRootDir string
	csiStatePath   string
}

// writeKustomization writes a kustomization of the user's kind beside
// package/: the package, its copy of install-values.yaml and the
// components a Kubernetes 1.37 cluster with the snapshot CRDs takes.
func writeKustomization(t *testing.T, root string, in installation) {
	t.Helper()
	rel, err := filepath.Rel(in.dir, filepath.Join(root, "package"))
	if err != nil {
		t.Fatal(err)
	}
	values := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: longhorn-install-values
  namespace: longhorn-system
  annotations:
    config.kubernetes.io/local-config: "true"
data:
  dataPath: %s
  kubeletRootDir: %s
  csiStatePath: %s
`, in.dataPath, in.kubeletRootDir, in.csiStatePath)
	// One node, whose disk is a folder of the machine's own: a volume's
	// replicas share it, whatever the disk's free space.
	settings := `apiVersion: v1
kind: ConfigMap
metadata:
  name: longhorn-default-setting
  namespace: longhorn-system
data:
  settings: replica-soft-anti-affinity=true,storage-minimal-available-percentage=0
`
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %[1]s
  - install-values.yaml
  - default-setting.yaml
components:
  - %[1]s/components/mutating-policies
  - %[1]s/components/snapshot-classes
  - %[1]s/components/install-values
`, rel)
	if !in.withUI {
		kustomization += "patches:\n  - target: {kind: Deployment, name: longhorn-ui}\n    patch: '[{\"op\": \"replace\", \"path\": \"/spec/replicas\", \"value\": 0}]'\n"
	}
	for name, data := range map[string]string{"install-values.yaml": values, "default-setting.yaml": settings, "kustomization.yaml": kustomization} {
		if err := os.WriteFile(filepath.Join(in.dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitFor polls cond every second until it holds, failing the test after
// timeout with what cond said last and what diagnose tells.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func(ctx context.Context) (bool, string, error), diagnose func() string) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		ok, said, err := cond(ctx)
		last = said
		return ok, err
	})
	if err != nil {
		extra := ""
		if diagnose != nil {
			extra = "\n" + diagnose()
		}
		t.Fatalf("%s: not within %s (%s): %v%s", what, timeout, last, err, extra)
	}
}

// deploymentsReady waits for every Deployment and DaemonSet of namespace
// to have all its pods ready and up to date.
func workloadsReady(t *testing.T, c *cluster.Cluster, client kubernetes.Interface, timeout time.Duration) {
	t.Helper()
	waitFor(t, "the manager DaemonSet and the CSI and UI Deployments ready", timeout, func(ctx context.Context) (bool, string, error) {
		var waiting []string
		dss, err := client.AppsV1().DaemonSets(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, ds := range dss.Items {
			if !daemonSetReady(&ds) {
				waiting = append(waiting, fmt.Sprintf("DaemonSet %s %d/%d ready", ds.Name, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled))
			}
		}
		deps, err := client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, d := range deps.Items {
			if want := ptrValue(d.Spec.Replicas); d.Status.ReadyReplicas != want || d.Status.UpdatedReplicas != want {
				waiting = append(waiting, fmt.Sprintf("Deployment %s %d/%d ready", d.Name, d.Status.ReadyReplicas, want))
			}
		}
		if len(dss.Items) == 0 || len(deps.Items) == 0 {
			waiting = append(waiting, fmt.Sprintf("%d DaemonSets and %d Deployments", len(dss.Items), len(deps.Items)))
		}
		return len(waiting) == 0, strings.Join(waiting, "; "), nil
	}, func() string { return c.PodsDiagnosis(client, namespace) })
}

func daemonSetReady(ds *appsv1.DaemonSet) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && s.DesiredNumberScheduled > 0 &&
		s.NumberReady == s.DesiredNumberScheduled && s.UpdatedNumberScheduled == s.DesiredNumberScheduled
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// install imports the images, writes the user's kustomization and applies
// it with the one command docs/deploying.md begins with, then waits until
// everything it deploys runs and the driver is registered with the
// kubelet.
func install(t *testing.T, c *cluster.Cluster) installation {
	t.Helper()
	ctx := context.Background()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	archives, withUI := imageArchives(t, root)
	if err := c.ImportImages(ctx, archives...); err != nil {
		t.Fatal(err)
	}
	if !withUI {
		t.Logf("Longhorn's UI is not built beside the repository (%s): its Deployment is scaled to 0", uiDist)
	}
	disk, err := c.SharedFolder("longhorn-disk")
	if err != nil {
		t.Fatal(err)
	}
	in := installation{dir: t.TempDir(), withUI: withUI, dataPath: disk, kubeletRootDir: c.KubeletRootDir(),
		csiStatePath: filepath.Join(c.DataDir, "longhorn-csi")}
	writeKustomization(t, root, in)

	started := time.Now()
	// The snapshot CRDs are the cluster's (most distributions ship them);
	// the test's cluster has them from the external-snapshotter's module.
	c.Kubectl(t, "", "apply", "-f", filepath.Join(root, "bin", "snapshot-crds"))
	out := c.Kubectl(t, "", "apply", "-k", in.dir)
	t.Logf("kubectl apply -k: %d objects", strings.Count(out, "\n"))
	client := c.KubeClient(t)
	workloadsReady(t, c, client, 6*time.Minute)
	waitFor(t, "the CSI driver registered with the kubelet (CSINode "+cluster.NodeName+")", time.Minute, func(ctx context.Context) (bool, string, error) {
		node, err := client.StorageV1().CSINodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		var drivers []string
		for _, d := range node.Spec.Drivers {
			drivers = append(drivers, d.Name)
			if d.Name == "driver.longhorn.io" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("drivers %v", drivers), nil
	}, func() string { return c.PodsDiagnosis(client, namespace) })
	t.Logf("installed: every workload ready and the driver registered %s after kubectl apply -k", time.Since(started).Round(time.Second))
	return in
}
