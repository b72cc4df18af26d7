package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary doubles as longhorn-manager when this is set, so the
// tests see exactly what a user sees.
const envRunMain = "LONGHORN_MANAGER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runManager(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1", "KUBECONFIG=")
	out, err := cmd.CombinedOutput()
	code := 0
	if exitErr, ok := err.(*exec.ExitError); ok {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

func TestBadInputEndsWithOneClearLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown daemon flag", []string{"daemon", "--no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{"missing kubeconfig file", []string{"daemon", "--kubeconfig", "/nonexistent/kubeconfig"}, "--kubeconfig /nonexistent/kubeconfig"},
		{"unreachable apiserver", []string{"daemon", "--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1"), "--data-dir", t.TempDir(), "--api-address", "127.0.0.1:0"}, "cannot reach the Kubernetes API at https://127.0.0.1:1"},
		{"no workers", []string{"daemon", "--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1"), "--workers", "0"}, "--workers must be at least 1"},
		{"unknown runner", []string{"daemon", "--kubeconfig", writeKubeconfig(t, "https://127.0.0.1:1"), "--recurring-job-runner", "kubelet"}, "--recurring-job-runner must be \"cronjob\" or \"manager\""},
		{"stray argument", []string{"daemon", "extra"}, "daemon takes no arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := runManager(t, c.args...)
			if code == 0 {
				t.Fatalf("exit code 0, want non-zero; output:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one line, got %d:\n%s", len(lines), out)
			}
			if !strings.HasPrefix(lines[0], "longhorn-manager: ") || !strings.Contains(lines[0], c.want) {
				t.Fatalf("line %q does not say %q", lines[0], c.want)
			}
		})
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := t.TempDir() + "/kubeconfig"
	data := `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ` + server + `
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: t
contexts:
- name: c
  context:
    cluster: c
    user: u
current-context: c
`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
