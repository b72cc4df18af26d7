//go:build e2e

package csi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	t.Cleanup(func() { cleanupCSINode(t, root, stateDir, devicesDirOf(e)) })
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
	// Each failed spec is also reported through t, so that it follows the
	// "--- FAIL" line a CI log's summary shows, not only in the specs' log.
	ginkgo.ReportAfterSuite("failures through testing.T", func(r ginkgo.Report) {
		for _, spec := range r.SpecReports {
			if spec.Failed() {
				t.Errorf("%s: %s at %s: %s", spec.State, spec.FullText(), spec.Failure.Location, firstLines(spec.Failure.Message, 6))
			}
		}
	})
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	reporter.NoColor = true
	ginkgo.RunSpecs(t, "CSI sanity", suite, reporter)
	sc.Finalize()
}

// firstLines keeps the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}
