//go:build e2e

package recurringjob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestASystemBackupJobMakesOneEachRunAndKeepsItsRetain runs a
// system-backup job as its CronJob pods do (their own account, an API
// that checks RBAC): each run makes a Ready system backup in the target,
// and the job keeps the newest retain of its own, deleting the older
// one's archive. Bad input is refused naming the field.
func TestASystemBackupJobMakesOneEachRunAndKeepsItsRetain(t *testing.T) {
	t.Parallel()
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) {
		o.ServiceAccount = framework.ServiceAccount
		o.CronJob.ServiceAccount = recurringJobAccount
		o.APITokenAudience = "longhorn-manager"
	})
	ctx := context.Background()
	e.Token = framework.TokenOf(t, e.Kube, e.NS, framework.ServiceAccount, "longhorn-manager")

	job := `{"name":"sysbak","task":"system-backup","cron":"@daily","retain":1,"parameters":{"volume-backup-policy":"disabled"}}`
	e.Call(t, "POST", "/v1/recurringjobs", job).Expect(t, 400, "backup-target")
	root := t.TempDir()
	e.SetBackupTarget(t, "file://"+root)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"system-backup","cron":"@daily","retain":1,"parameters":{"volume-backup-policy":"sometimes"}}`).
		Expect(t, 400, "parameters[volume-backup-policy]", "if-not-present, always or disabled")
	e.Call(t, "POST", "/v1/recurringjobs", job).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/sysbak", "").Status == 200, nil
	})

	apiToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(apiToken, []byte(framework.TokenOf(t, e.Kube, e.NS, recurringJobAccount, "longhorn-manager")), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := tokenKubeconfig(t, e.Cluster, framework.TokenOf(t, e.Kube, e.NS, recurringJobAccount))
	run := func(tick string) {
		t.Helper()
		if out := e.RunJob(t, kubeconfig, "sysbak", tick, "--api-token-file", apiToken); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run for %s: %s", tick, out)
		}
	}
	archive := func(name string) string {
		sb := e.Call(t, "GET", "/v1/systembackups/"+name, "")
		if sb.Status != 200 {
			return ""
		}
		return filepath.Join(root, "backupstore/system-backups", sb.Body["version"].(string), name, "system-backup.zip")
	}

	run("2026-11-23T01:00:00Z")
	first := e.Call(t, "GET", "/v1/systembackups/sysbak-20261123t010000z", "").Expect(t, 200)
	if first.Body["state"] != "Ready" || first.Body["volumeBackupPolicy"] != "disabled" {
		t.Fatalf("the first run's system backup: %s", first.Raw)
	}
	firstArchive := archive("sysbak-20261123t010000z")
	if _, err := os.Stat(firstArchive); err != nil {
		t.Fatal(err)
	}
	// A second run for the same tick makes none.
	run("2026-11-23T01:00:00Z")
	if list, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Fatalf("system backups after two runs for one tick: %v, %v", list, err)
	}

	run("2026-11-24T01:00:00Z")
	e.Call(t, "GET", "/v1/systembackups/sysbak-20261124t010000z", "").Expect(t, 200, `"state":"Ready"`)
	framework.Eventually(t, 30*time.Second, "the first system backup and its archive deleted (retain 1)", func() (bool, error) {
		_, err := os.Stat(firstArchive)
		return e.Call(t, "GET", "/v1/systembackups/sysbak-20261123t010000z", "").Status == 404 && os.IsNotExist(err), nil
	})
	list, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("system backups after two runs with retain 1: %v, %v", list, err)
	}
}
