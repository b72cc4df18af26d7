package app

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestARunWithAFailedVolumeFails: the recurring-job command exits non-zero
// when a volume failed (here a backup with no backup target set), after
// doing the others, so the CronJob's Job fails and its lastSuccessfulTime
// does not move; the output still counts every volume.
func TestARunWithAFailedVolumeFails(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	kubeconfig := serviceAccountKubeconfig(t, e.cluster, e.ns)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2,"groups":["default"]}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	e.waitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.call(t, "GET", "/v1/recurringjobs/nightly", "").status == 200, nil })

	cmd := exec.Command(managerBinary(t), "recurring-job", "nightly", "--manager-url", e.base+"/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.ns, "--tick", "2026-11-23T00:00:00Z", "--backup-timeout", "1m")
	out, err := cmd.CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() == 0 {
		t.Fatalf("a run whose only volume failed exited with %v, want a non-zero exit code\n%s", err, out)
	}
	if !strings.Contains(string(out), "succeeded=0 failed=1 skipped=0") || !strings.Contains(string(out), "volumes failed: 1 of 1") {
		t.Fatalf("output does not count the failed volume or say the run failed:\n%s", out)
	}
}
