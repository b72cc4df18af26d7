package csi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
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
	e := framework.NewAPIEnv(t)
	stateDir, root := t.TempDir(), t.TempDir()
	t.Cleanup(func() { cleanupCSINode(t, stateDir, root) })
	sock, _ := framework.ServeCSI(t, e, csi.Options{NodeID: "node-1", Controller: true, StateDir: stateDir})

	cfg := sanity.NewTestConfig()
	cfg.Address = sock
	cfg.TargetPath = filepath.Join(root, "target")
	cfg.StagingPath = filepath.Join(root, "staging")
	cfg.TestVolumeSize = 64 << 20
	cfg.IdempotentCount = 2
	// Longhorn snapshots: a backup (the default type) needs a backup
	// target, and the CSI snapshot tests make dozens.
	cfg.TestSnapshotParameters = map[string]string{"type": "snap"}
	sc := sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	ginkgo.RunSpecs(t, "CSI sanity", suite, reporter)
	sc.Finalize()
}
