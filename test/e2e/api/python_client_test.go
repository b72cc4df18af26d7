//go:build e2e

package api

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// pythonWithRequests is Debian's python3 (or, without it, the first
// python3 on PATH) if it can import what Longhorn's python client
// imports.
func pythonWithRequests(t *testing.T) string {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := exec.LookPath(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Fatalf("the python client test needs python3: run scripts/install-test-deps.sh (%v)", err)
		}
	}
	if out, err := exec.Command(python, "-c", "import requests, six").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import requests and six (Debian's python3-requests and python3-six): run scripts/install-test-deps.sh\n%s", python, out)
	}
	return python
}

// TestLonghornPythonClient runs Longhorn's python client from
// longhorn-tests, unmodified (testdata/longhorn-tests-python-client), with
// the calls and arguments of longhorn-tests' common.py, against the
// manager on the real control plane: list volumes, create_volume with
// dataEngine, attach, snapshots, detach, delete, recurring jobs.
func TestLonghornPythonClient(t *testing.T) {
	python := pythonWithRequests(t)
	e := framework.NewAPIEnv(t)
	dir, err := filepath.Abs("testdata/longhorn-tests-python-client")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-B", "drive.py", e.Base+"/v1/schemas", "node-1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("python client:\n%s", out)
	if err != nil {
		t.Fatalf("Longhorn's python client failed: %v", err)
	}
	for _, want := range []string{"ok: create_volume", "ok: attach", "ok: snapshotCRCreate", "ok: expand", "ok: detach", "ok: delete", "ok: delete recurring jobs"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the client's run lacks %q", want)
		}
	}
}
