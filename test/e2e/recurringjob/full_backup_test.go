//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestFullBackupInterval: a backup job with full-backup-interval 2 takes
// full backups on its even runs (as Longhorn counts runs, by the job's
// executionCount, which the test sets as the CronJob runner's mirror
// would); each Backup says what it was, the volume's first one full. A
// full backup uploads blocks the target has again. Bad parameters and an
// unknown backupMode are refused naming the field.
func TestFullBackupInterval(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	target := "file://" + t.TempDir()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"snapshot","cron":"@daily","retain":1,"parameters":{"full-backup-interval":"2"}}`).
		Expect(t, 400, "spec.parameters[full-backup-interval]", "backup")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"backup","cron":"@daily","retain":1,"parameters":{"full-backup-interval":"-1"}}`).
		Expect(t, 400, "spec.parameters[full-backup-interval]", "whole number")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"backup","cron":"@daily","retain":1,"parameters":{"volume-backup-policy":"always"}}`).
		Expect(t, 400, "spec.parameters[volume-backup-policy]")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"weekly","task":"backup","cron":"@daily","retain":5,"parameters":{"full-backup-interval":"2"}}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job and setting cached", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/recurringjobs/weekly", "").Raw, `"full-backup-interval":"2"`) &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, target), nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"weekly"}]}`).Expect(t, 200)
	e.WaitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "db", "attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x55 0 3M", "flush")
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"x","backupMode":"differential"}`).Expect(t, 400, "backupMode", "full")

	ctx := context.Background()
	for i, run := range []struct {
		tick, mode string
		again      bool
	}{
		// The first run is not a full one, but the volume's first backup is.
		{"2026-11-22T01:00:00Z", "full", false},
		{"2026-11-23T01:00:00Z", "full", true},
		{"2026-11-24T01:00:00Z", "incremental", false},
	} {
		tick, _ := time.Parse(time.RFC3339, run.tick)
		if err := datastore.RetryOnConflict(func() error {
			j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(ctx, "weekly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			j.Status.ExecutionCount, j.Status.LastScheduleTime = int64(i+1), &metav1.Time{Time: tick}
			_, err = e.LH.LonghornV1beta2().RecurringJobs(e.NS).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if out := e.RunJob(t, kubeconfig, "weekly", run.tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run %d: %s", i+1, out)
		}
		var b map[string]any
		framework.Eventually(t, 30*time.Second, "run "+run.tick+"'s backup listed with its mode", func() (bool, error) {
			r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupList", "")
			if r.Status != 200 {
				return false, nil
			}
			for _, item := range r.Body["data"].([]any) {
				o := item.(map[string]any)
				labels, _ := o["labels"].(map[string]any)
				// The tick's label value: 20261122T010000Z.
				if o["state"] == "Completed" && labels["RecurringJobTick"] == strings.NewReplacer("-", "", ":", "").Replace(run.tick) {
					b = o
					return true, nil
				}
			}
			return false, nil
		})
		if b["backupMode"] != run.mode || (b["reUploadedDataSize"] != "0") != run.again {
			t.Errorf("run %d: backupMode %v, re-uploaded %v bytes, newly %v; want %s, re-uploaded: %v",
				i+1, b["backupMode"], b["reUploadedDataSize"], b["newlyUploadDataSize"], run.mode, run.again)
		}
	}
	// The API shows each backup's mode, as Longhorn's UI reads it.
	list := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupList", "").Expect(t, 200)
	full := 0
	for _, item := range list.Body["data"].([]any) {
		if item.(map[string]any)["backupMode"] == "full" {
			full++
		}
	}
	if full != 2 {
		t.Errorf("the API shows %d full backups, want 2: %s", full, list.Raw)
	}
}
