package app

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
)

// TestCSISanity runs Kubernetes' csi-sanity against the driver, both its
// services, on a real manager and control plane: every test of a
// capability the driver declares must pass, on real volumes, mounts and
// filesystems; the tests of what it does not declare skip themselves
// (docs/csi.md lists them).
func TestCSISanity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the Node service needs root: it runs losetup, mkfs and mount")
	}
	for _, tool := range []string{"nbdfuse", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: the Node service makes a volume's device with nbdfuse (libnbd-bin) and a loop device (util-linux)", tool)
		}
	}
	e := newAPIEnv(t)
	stateDir, root := t.TempDir(), t.TempDir()
	t.Cleanup(func() { cleanupCSINode(t, stateDir, root) })
	d, err := csi.NewDriver(client.NewClient(e.base+"/v1", 10*time.Second), csi.Options{NodeID: "node-1", Controller: true, StateDir: stateDir})
	if err != nil {
		t.Fatal(err)
	}
	// A short path: a unix socket's is at most 107 bytes.
	sockDir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the CSI driver stopped with %v", err)
		}
	})
	eventually(t, 10*time.Second, "the driver serves its socket", func() (bool, error) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})

	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(root, "target")
	cfg.StagingPath = filepath.Join(root, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.IdempotentCount = 2
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	ginkgo.RunSpecs(t, "CSI sanity", suite, reporter)
	sc.Finalize()
}
