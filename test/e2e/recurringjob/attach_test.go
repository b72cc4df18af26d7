//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/jobrun"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestRecurringJobRunKeepsAVolumeAUserTookOver runs a job in-process
// against a real manager on the control plane, with detached volumes
// allowed: "idle" is attached by the run in its name and detached after,
// as before; "taken" is attached by the run too, then a user attaches it
// (a plain attach, no attachedBy) while the run holds it, and it stays
// attached, with its frontend, once the run ends.
func TestRecurringJobRunKeepsAVolumeAUserTookOver(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "PUT", "/v1/settings/allow-recurring-job-while-volume-detached", `{"value":"true"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"snapshot","cron":"@hourly","retain":2,"concurrency":2}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job and setting cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/nightly", "").Status == 200 &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/allow-recurring-job-while-volume-detached", "").Raw, `"value":"true"`), nil
	})
	for _, name := range []string{"idle", "taken"} {
		e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"nightly","isGroup":false}]}`).Expect(t, 200)
		e.WaitVolume(t, name, "created", func(m map[string]any) bool { return m["state"] == "detached" })
	}

	tick := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	runID := "recurring-job/nightly/20261122T010000Z"
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	heldBy := map[string]any{}
	r := &jobrun.Executor{
		Namespace: e.NS, Longhorn: e.LH, Kube: e.Kube, API: client.NewClient(e.Base+"/v1", 10*time.Second),
		Log: logrus.NewEntry(log), RetryFor: 10 * time.Second, Tick: tick, BackupTimeout: time.Minute, Decided: true,
		AfterAttach: func(ctx context.Context, job, volume string) {
			v := e.Call(t, "GET", "/v1/volumes/"+volume, "").Expect(t, 200).Body
			heldBy[volume] = v["attachedBy"]
			if volume == "taken" {
				// The workload's attach takes the volume over and turns its frontend on.
				taken := e.Call(t, "POST", "/v1/volumes/taken?action=attach", `{"hostId":"node-1"}`).Expect(t, 200).Body
				if taken["attachedBy"] != "" || taken["nodeID"] != "node-1" {
					t.Errorf("the user's attach: %v", taken)
				}
			}
		},
	}
	res, err := r.Run(context.Background(), "nightly")
	if err != nil || res.Succeeded != 2 || res.Failed != 0 {
		t.Fatalf("run: %+v, %v", res, err)
	}
	for _, v := range []string{"idle", "taken"} {
		if heldBy[v] != runID {
			t.Errorf("%s was held by %v during the run, want %s", v, heldBy[v], runID)
		}
	}
	e.WaitVolume(t, "idle", "idle back to detached", func(m map[string]any) bool {
		return m["state"] == "detached" && m["nodeID"] == "" && m["attachedBy"] == ""
	})
	// The run's detach came before Run returned: "taken" stays the user's.
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		v := e.Call(t, "GET", "/v1/volumes/taken", "").Expect(t, 200).Body
		if v["nodeID"] != "node-1" || v["attachedBy"] != "" || (v["state"] != "attached" && v["state"] != "detached") {
			t.Fatalf("the user's volume after the run: %v", v)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The job attached it without a frontend; the user's attach started one.
	e.WaitVolume(t, "taken", "taken attached with a frontend", func(m map[string]any) bool {
		return m["state"] == "attached" && m["frontendDisabled"] == false && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	if n := e.JobSnapshots(t, "taken", "nightly"); n != 1 {
		t.Errorf("taken has %d job snapshots, want 1", n)
	}
	e.Call(t, "POST", "/v1/volumes/idle?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "idle", "idle attached to look", func(m map[string]any) bool { return m["state"] == "attached" })
	if n := e.JobSnapshots(t, "idle", "nightly"); n != 1 {
		t.Errorf("idle has %d job snapshots, want 1", n)
	}
}
