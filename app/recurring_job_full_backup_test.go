package app

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

// TestFullBackupInterval: a backup job with full-backup-interval 2 takes
// full backups on its even runs (as Longhorn counts runs, by the job's
// executionCount, which the test sets as the CronJob runner's mirror
// would); each Backup says what it was, the volume's first one full. A
// full backup uploads blocks the target has again. Bad parameters and an
// unknown backupMode are refused naming the field.
func TestFullBackupInterval(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	kubeconfig := serviceAccountKubeconfig(t, e.cluster, e.ns)
	target := "file://" + t.TempDir()
	e.call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).expect(t, 200)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"snapshot","cron":"@daily","retain":1,"parameters":{"full-backup-interval":"2"}}`).
		expect(t, 400, "spec.parameters[full-backup-interval]", "backup")
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"backup","cron":"@daily","retain":1,"parameters":{"full-backup-interval":"-1"}}`).
		expect(t, 400, "spec.parameters[full-backup-interval]", "whole number")
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"bad","task":"backup","cron":"@daily","retain":1,"parameters":{"volume-backup-policy":"always"}}`).
		expect(t, 400, "spec.parameters[volume-backup-policy]")
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"weekly","task":"backup","cron":"@daily","retain":5,"parameters":{"full-backup-interval":"2"}}`).expect(t, 200)
	eventually(t, 10*time.Second, "job and setting cached", func() (bool, error) {
		return strings.Contains(e.call(t, "GET", "/v1/recurringjobs/weekly", "").raw, `"full-backup-interval":"2"`) &&
			strings.Contains(e.call(t, "GET", "/v1/settings/backup-target", "").raw, target), nil
	})
	e.call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"weekly"}]}`).expect(t, 200)
	e.waitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolume(t, "db", "attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	qemuIO(t, v["endpoint"].(string), "write -P 0x55 0 3M", "flush")
	e.call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"x","backupMode":"differential"}`).expect(t, 400, "backupMode", "full")

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
			j, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(ctx, "weekly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			j.Status.ExecutionCount, j.Status.LastScheduleTime = int64(i+1), &metav1.Time{Time: tick}
			_, err = e.lh.LonghornV1beta2().RecurringJobs(e.ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if out := e.runJob(t, kubeconfig, "weekly", run.tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run %d: %s", i+1, out)
		}
		var b map[string]any
		eventually(t, 30*time.Second, "run "+run.tick+"'s backup listed with its mode", func() (bool, error) {
			r := e.call(t, "POST", "/v1/backupvolumes/db?action=backupList", "")
			if r.status != 200 {
				return false, nil
			}
			for _, item := range r.body["data"].([]any) {
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
	list := e.call(t, "POST", "/v1/backupvolumes/db?action=backupList", "").expect(t, 200)
	full := 0
	for _, item := range list.body["data"].([]any) {
		if item.(map[string]any)["backupMode"] == "full" {
			full++
		}
	}
	if full != 2 {
		t.Errorf("the API shows %d full backups, want 2: %s", full, list.raw)
	}
}
