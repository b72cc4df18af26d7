//go:build e2enode

package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/csi/registration"
	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// TestTheKubeletRegistersTheCSIDriver: the Node service, run as
// `longhorn-manager csi --kubelet-registration-path` runs it, on the
// kubelet's plugins directory (on the host, as package/ mounts it), is
// registered by the node's real kubelet: the CSINode lists
// driver.longhorn.io with the node's ID and its topology key. Its
// manager is unreachable (the driver answers Probe "not ready"), which
// must not hold the registration back. When the registration stops, the
// kubelet drops the driver; a new registration (a restart) is taken
// again.
func TestTheKubeletRegistersTheCSIDriver(t *testing.T) {
	c := cluster.Get(t)
	kube := c.KubeClient(t)
	root := filepath.Join(c.DataDir, "kubelet", "root")
	socket := filepath.Join(root, "plugins", csi.DriverName, "csi.sock")
	endpoint := "unix://" + socket

	d, err := csi.NewDriver(client.NewClient("http://127.0.0.1:1/v1", time.Second), csi.Options{NodeID: cluster.NodeName, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopDriver := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, endpoint) }()
	t.Cleanup(func() {
		stopDriver()
		if err := <-served; err != nil {
			t.Errorf("the driver: %v", err)
		}
		os.RemoveAll(filepath.Dir(socket))
	})

	register := func() (stop func()) {
		r, err := registration.New(registration.Options{CSIEndpoint: endpoint, KubeletEndpoint: socket, Dir: filepath.Join(root, "plugins_registry")})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(rctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the registration: %v", err)
			}
		}
	}

	stop := register()
	waitCSINodeDriver(t, kube, true)
	stop()
	waitCSINodeDriver(t, kube, false)
	stop = register()
	defer stop()
	waitCSINodeDriver(t, kube, true)
}

// waitCSINodeDriver waits until the node's CSINode lists the driver, as
// NodeGetInfo answered it, or (listed false) no longer does.
func waitCSINodeDriver(t *testing.T, kube kubernetes.Interface, listed bool) {
	t.Helper()
	var last *storagev1.CSINode
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := kube.StorageV1().CSINodes().Get(ctx, cluster.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return !listed, nil
		}
		if err != nil {
			return false, err
		}
		last = n
		i := slices.IndexFunc(n.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == csi.DriverName })
		if !listed {
			return i < 0, nil
		}
		if i < 0 {
			return false, nil
		}
		d := n.Spec.Drivers[i]
		if d.NodeID != cluster.NodeName || !slices.Contains(d.TopologyKeys, "kubernetes.io/hostname") {
			t.Fatalf("the CSINode lists %s with node ID %q and topology keys %v: want %s and kubernetes.io/hostname", csi.DriverName, d.NodeID, d.TopologyKeys, cluster.NodeName)
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the CSINode of %s (listed %v wanted): %v; last seen %+v", cluster.NodeName, listed, err, last)
	}
}
