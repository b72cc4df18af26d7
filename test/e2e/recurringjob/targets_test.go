//go:build e2e

package recurringjob

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestBackupJobPerTarget: a backup job naming a BackupTarget backs up
// there, a job naming none to the volume's target (default), and each
// job's retain counts its backups in its own target: three runs of a
// job keeping 2 offsite leave 2 there, two runs of a job keeping 1 in
// default leave 1 there, and neither touches the other's. A job naming
// a target that does not exist is refused naming the field.
func TestBackupJobPerTarget(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	local, offsite := "file://"+t.TempDir(), "file://"+t.TempDir()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+local+`"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"`+offsite+`","pollInterval":"300"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "offsite and the setting cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200 &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, local), nil
	})
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"lost","task":"backup","cron":"@daily","retain":1,"backupTargetName":"nowhere"}`).
		Expect(t, 400, "spec.backupTargetName", "nowhere")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"hourly","task":"backup","cron":"@hourly","retain":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2,"backupTargetName":"offsite"}`).
		Expect(t, 200, `"backupTargetName":"offsite"`)
	framework.Eventually(t, 10*time.Second, "jobs cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/nightly", "").Status == 200 && e.Call(t, "GET", "/v1/recurringjobs/hourly", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"hourly"},{"name":"nightly"}]}`).Expect(t, 200)
	e.WaitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "db", "attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x5a 0 2M", "flush")

	for _, run := range []struct{ job, tick string }{
		{"nightly", "2026-11-22T02:00:00Z"}, {"hourly", "2026-11-22T03:00:00Z"},
		{"nightly", "2026-11-23T02:00:00Z"}, {"hourly", "2026-11-22T04:00:00Z"},
		{"nightly", "2026-11-24T02:00:00Z"},
	} {
		if out := e.RunJob(t, kubeconfig, run.job, run.tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run of %s at %s: %s", run.job, run.tick, out)
		}
	}
	// backupList of a target's backup volume: the jobs' Completed backups.
	jobs := func(bv string) map[string]int {
		r := e.Call(t, "POST", "/v1/backupvolumes/"+bv+"?action=backupList", "")
		if r.Status != 200 {
			return nil
		}
		out := map[string]int{}
		for _, item := range r.Body["data"].([]any) {
			o := item.(map[string]any)
			labels, _ := o["labels"].(map[string]any)
			if o["state"] == "Completed" {
				out[labels["RecurringJob"].(string)+"@"+o["backupTargetName"].(string)]++
			}
		}
		return out
	}
	away := types.BackupVolumeObjectName("db", "offsite")
	framework.EventuallyAgree(t, 30*time.Second, "each job's backups in its own target, retained there", func() string {
		home, off := jobs("db"), jobs(away)
		if len(home) != 1 || home["hourly@default"] != 1 || len(off) != 1 || off["nightly@offsite"] != 2 {
			return fmt.Sprintf("default holds %v, offsite %v; want hourly@default:1 and nightly@offsite:2", home, off)
		}
		return ""
	})
}
