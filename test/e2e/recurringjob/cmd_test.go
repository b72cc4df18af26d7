//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestRecurringJobCommand(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	for _, v := range []struct{ name, selector string }{
		{"by-job", `[{"name":"snap","isGroup":false}]`},
		{"by-group", `[{"name":"gold","isGroup":true}]`},
		{"by-default", `[]`},
		{"other", `[{"name":"silver","isGroup":true}]`},
		{"asleep", `[{"name":"snap","isGroup":false}]`},
	} {
		if v.selector != "[]" && strings.Contains(v.selector, `"snap"`) && v.name == "by-job" {
			// The job must exist before a volume may select it.
			e.Call(t, "POST", "/v1/recurringjobs", `{"name":"snap","task":"snapshot","cron":"@hourly","retain":2,"concurrency":2,"groups":["gold","default"],"labels":{"team":"db"}}`).Expect(t, 200)
			framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/snap", "").Status == 200, nil })
		}
		e.Call(t, "POST", "/v1/volumes", `{"name":"`+v.name+`","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":`+v.selector+`}`).Expect(t, 200)
		if v.name != "asleep" {
			e.WaitVolume(t, v.name, "created", func(m map[string]any) bool { return m["state"] == "detached" })
			e.Call(t, "POST", "/v1/volumes/"+v.name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
		}
	}
	for _, v := range []string{"by-job", "by-group", "by-default", "other"} {
		e.WaitVolume(t, v, "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	}

	out := e.RunJob(t, kubeconfig, "snap", "2026-11-22T01:00:00Z")
	if !strings.Contains(out, "succeeded=3 failed=0 skipped=1") {
		t.Fatalf("first run: %s", out)
	}
	for _, v := range []string{"by-job", "by-group", "by-default"} {
		if n := e.JobSnapshots(t, v, "snap"); n != 1 {
			t.Errorf("%s has %d job snapshots after one run", v, n)
		}
	}
	if n := e.JobSnapshots(t, "other", "snap"); n != 0 {
		t.Errorf("a volume of another group got %d snapshots", n)
	}

	// The same tick again makes nothing twice.
	e.RunJob(t, kubeconfig, "snap", "2026-11-22T01:00:00Z")
	if n := e.JobSnapshots(t, "by-job", "snap"); n != 1 {
		t.Errorf("a second run of the same tick made %d snapshots", n)
	}
	// Retain 2 holds over later ticks; concurrency 2 is never exceeded.
	e.RunJob(t, kubeconfig, "snap", "2026-11-22T02:00:00Z")
	out = e.RunJob(t, kubeconfig, "snap", "2026-11-22T03:00:00Z")
	if !strings.Contains(out, "max-in-flight=") || strings.Contains(out, "max-in-flight=3") || strings.Contains(out, "max-in-flight=4") {
		t.Errorf("concurrency exceeded: %s", out)
	}
	for _, v := range []string{"by-job", "by-group", "by-default"} {
		if n := e.JobSnapshots(t, v, "snap"); n != 2 {
			t.Errorf("%s keeps %d job snapshots, want retain 2", v, n)
		}
	}

	// A detached volume runs once the setting allows it, and ends detached.
	e.Call(t, "PUT", "/v1/settings/allow-recurring-job-while-volume-detached", `{"value":"true"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "setting cached", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/allow-recurring-job-while-volume-detached", "").Raw, `"value":"true"`), nil
	})
	out = e.RunJob(t, kubeconfig, "snap", "2026-11-22T04:00:00Z")
	if !strings.Contains(out, "succeeded=4 failed=0 skipped=0") {
		t.Fatalf("run with detached volumes allowed: %s", out)
	}
	e.WaitVolume(t, "asleep", "back to detached", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/asleep?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "asleep", "attached to look", func(m map[string]any) bool { return m["state"] == "attached" })
	if n := e.JobSnapshots(t, "asleep", "snap"); n != 1 {
		t.Errorf("the detached volume has %d job snapshots", n)
	}

	// A job that no longer exists ends the run cleanly.
	if out := e.RunJob(t, kubeconfig, "gone", "2026-11-22T05:00:00Z"); !strings.Contains(out, "succeeded=0") {
		t.Errorf("a missing job: %s", out)
	}
	events, err := e.Kube.CoreV1().Events(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		if ev.InvolvedObject.Name == "snap" && ev.Reason == "Completed" && strings.Contains(ev.Message, "3 volumes succeeded") {
			found = true
		}
	}
	if !found {
		t.Error("no Normal event with the run's counts on the RecurringJob")
	}
}

func TestRecurringBackupJobKeepsRetainBackupsThatRestore(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	target := "file://" + t.TempDir()
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":1}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job and setting cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/nightly", "").Status == 200 &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, target), nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"nightly"}]}`).Expect(t, 200)
	e.WaitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "db", "attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x77 0 1M", "flush")

	for i, tick := range []string{"2026-11-22T01:00:00Z", "2026-11-22T01:00:00Z", "2026-11-23T01:00:00Z"} {
		if out := e.RunJob(t, kubeconfig, "nightly", tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run %d: %s", i, out)
		}
	}
	var url string
	framework.Eventually(t, 30*time.Second, "exactly one job backup kept", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/backupvolumes/db?action=backupList", "")
		if r.Status != 200 {
			return false, nil
		}
		data := r.Body["data"].([]any)
		if len(data) != 1 {
			return false, nil
		}
		b := data[0].(map[string]any)
		url, _ = b["url"].(string)
		return b["state"] == "Completed" && b["labels"].(map[string]any)["RecurringJob"] == "nightly", nil
	})
	if n := e.JobSnapshots(t, "db", "nightly"); n != 1 {
		t.Errorf("the backup job keeps %d snapshots, want the newest only", n)
	}
	e.Call(t, "POST", "/v1/volumes", `{"name":"db-copy","size":"4Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "restored", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "db-copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	e.Call(t, "POST", "/v1/volumes/db-copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolume(t, "db-copy", "copy attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	framework.QemuIO(t, c["endpoint"].(string), "read -P 0x77 0 1M")
}

func TestSuspendTimeZoneAndSkipImmediatelyOnTheCronJobRunner(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"paris","task":"snapshot","cron":"0 2 * * *","retain":1,"timeZone":"Mars/Base"}`).Expect(t, 400, "spec.timeZone")
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"paris","task":"snapshot","cron":"0 2 * * *","retain":1,"timeZone":"Europe/Paris","suspend":true,"startingDeadlineSeconds":600}`).Expect(t, 200)
	e.WaitCronJob(t, "paris", "CronJob with zone, suspension and deadline", func(cj *batchv1.CronJob) bool {
		return *cj.Spec.TimeZone == "Europe/Paris" && *cj.Spec.Suspend && cj.Spec.StartingDeadlineSeconds != nil && *cj.Spec.StartingDeadlineSeconds == 600
	})
	// The manager records the suspension it saw, and leaves the spec as
	// written: skipImmediately stays unset (the daemon's default applies).
	framework.Eventually(t, 10*time.Second, "suspension observed, spec untouched", func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "paris", metav1.GetOptions{})
		return err == nil && j.Status.ObservedSuspend != nil && *j.Status.ObservedSuspend && j.Spec.SkipImmediately == nil && j.Status.LastSkipped == nil, nil
	})

	// Resume with skipImmediately: the tick due now is skipped, and the
	// field stays true (a standing choice, never written back).
	e.Call(t, "PUT", "/v1/recurringjobs/paris", `{"suspend":false,"skipImmediately":true}`).Expect(t, 200)
	var skipped time.Time
	framework.Eventually(t, 15*time.Second, "skip recorded", func() (bool, error) {
		j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "paris", metav1.GetOptions{})
		if err != nil || j.Status.LastSkipped == nil || j.Status.ObservedSuspend == nil || *j.Status.ObservedSuspend {
			return false, err
		}
		if j.Spec.SkipImmediately == nil || !*j.Spec.SkipImmediately {
			t.Fatalf("spec.skipImmediately written back: %v", j.Spec.SkipImmediately)
		}
		skipped = j.Status.LastSkipped.Time
		return true, nil
	})
	e.WaitCronJob(t, "paris", "CronJob resumed", func(cj *batchv1.CronJob) bool { return !*cj.Spec.Suspend })
	// A run for a tick not after the skip does nothing.
	out := e.RunJob(t, framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS), "paris", skipped.Add(-time.Minute).UTC().Format(time.RFC3339))
	if !strings.Contains(out, "succeeded=0 failed=0 skipped=0") {
		t.Fatalf("a run for a skipped tick: %s", out)
	}
}
