//go:build e2e

package recurringjob

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestARunWithAFailedVolumeFails: the recurring-job command exits non-zero
// when a volume failed (here a backup with no backup target set), after
// doing the others, so the CronJob's Job fails and its lastSuccessfulTime
// does not move; the output still counts every volume.
func TestARunWithAFailedVolumeFails(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2,"groups":["default"]}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/nightly", "").Status == 200, nil })

	cmd := exec.Command(framework.ManagerBinary(t), "recurring-job", "nightly", "--manager-url", e.Base+"/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.NS, "--tick", "2026-11-23T00:00:00Z", "--backup-timeout", "1m")
	out, err := cmd.CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() == 0 {
		t.Fatalf("a run whose only volume failed exited with %v, want a non-zero exit code\n%s", err, out)
	}
	if !strings.Contains(string(out), "succeeded=0 failed=1 skipped=0") || !strings.Contains(string(out), "volumes failed: 1 of 1") {
		t.Fatalf("output does not count the failed volume or say the run failed:\n%s", out)
	}
}
