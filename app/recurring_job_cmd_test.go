package app

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

func TestScheduleTick(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 34, 56, 0, time.UTC)
	cases := []struct{ name, flag, job, want string }{
		{"the flag wins", "2026-11-22T02:00:00Z", "snap-29000000", "2026-11-22T02:00:00Z"},
		{"the Job name carries minutes since the epoch", "", "snap-29399520", time.Unix(29399520*60, 0).UTC().Format(time.RFC3339)},
		{"without either, the current minute", "", "", "2026-11-22T12:34:00Z"},
		{"a Job name without a tick falls back", "", "manual-run", "2026-11-22T12:34:00Z"},
		{"a Job of another CronJob falls back", "", "other-29399520", "2026-11-22T12:34:00Z"},
		{"a Job made by hand with a small number falls back", "", "snap-1", "2026-11-22T12:34:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := scheduleTick(c.flag, "snap", c.job, now)
			if err != nil || got.Format(time.RFC3339) != c.want {
				t.Fatalf("got %v, %v; want %s", got, err, c.want)
			}
		})
	}
	if _, err := scheduleTick("yesterday", "snap", "", now); err == nil || !strings.Contains(err.Error(), "--tick") {
		t.Fatalf("a bad --tick: %v", err)
	}
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// managerBinary builds longhorn-manager once for the package's tests.
func managerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testcluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "longhorn-manager-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "longhorn-manager")
		out, err := exec.Command("go", "build", "-o", binary, root).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// serviceAccountKubeconfig writes a kubeconfig that acts as the manager's
// ServiceAccount, which the CronJob pods run as.
func serviceAccountKubeconfig(t *testing.T, cluster *testcluster.Cluster, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:" + ns + ":" + serviceAccount
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// runJob runs `longhorn-manager recurring-job` as a process and returns
// its summary line.
func (e *apiEnv) runJob(t *testing.T, kubeconfig, job, tick string) string {
	t.Helper()
	cmd := exec.Command(managerBinary(t), "recurring-job", job, "--manager-url", e.base+"/v1", "--kubeconfig", kubeconfig,
		"--namespace", e.ns, "--tick", tick, "--backup-timeout", "1m")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("recurring-job %s: %v\n%s", job, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}

func (e *apiEnv) jobSnapshots(t *testing.T, volume, job string) int {
	t.Helper()
	list := e.call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotList", "").expect(t, 200)
	n := 0
	for _, item := range list.body["data"].([]any) {
		s := item.(map[string]any)
		labels, _ := s["labels"].(map[string]any)
		if labels["RecurringJob"] == job && s["removed"] != true {
			n++
		}
	}
	return n
}

func TestRecurringJobCommand(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	kubeconfig := serviceAccountKubeconfig(t, e.cluster, e.ns)
	for _, v := range []struct{ name, selector string }{
		{"by-job", `[{"name":"snap","isGroup":false}]`},
		{"by-group", `[{"name":"gold","isGroup":true}]`},
		{"by-default", `[]`},
		{"other", `[{"name":"silver","isGroup":true}]`},
		{"asleep", `[{"name":"snap","isGroup":false}]`},
	} {
		if v.selector != "[]" && strings.Contains(v.selector, `"snap"`) && v.name == "by-job" {
			// The job must exist before a volume may select it.
			e.call(t, "POST", "/v1/recurringjobs", `{"name":"snap","task":"snapshot","cron":"@hourly","retain":2,"concurrency":2,"groups":["gold","default"],"labels":{"team":"db"}}`).expect(t, 200)
			eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.call(t, "GET", "/v1/recurringjobs/snap", "").status == 200, nil })
		}
		e.call(t, "POST", "/v1/volumes", `{"name":"`+v.name+`","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":`+v.selector+`}`).expect(t, 200)
		if v.name != "asleep" {
			e.waitVolume(t, v.name, "created", func(m map[string]any) bool { return m["state"] == "detached" })
			e.call(t, "POST", "/v1/volumes/"+v.name+"?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
		}
	}
	for _, v := range []string{"by-job", "by-group", "by-default", "other"} {
		e.waitVolume(t, v, "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	}

	out := e.runJob(t, kubeconfig, "snap", "2026-11-22T01:00:00Z")
	if !strings.Contains(out, "succeeded=3 failed=0 skipped=1") {
		t.Fatalf("first run: %s", out)
	}
	for _, v := range []string{"by-job", "by-group", "by-default"} {
		if n := e.jobSnapshots(t, v, "snap"); n != 1 {
			t.Errorf("%s has %d job snapshots after one run", v, n)
		}
	}
	if n := e.jobSnapshots(t, "other", "snap"); n != 0 {
		t.Errorf("a volume of another group got %d snapshots", n)
	}

	// The same tick again makes nothing twice.
	e.runJob(t, kubeconfig, "snap", "2026-11-22T01:00:00Z")
	if n := e.jobSnapshots(t, "by-job", "snap"); n != 1 {
		t.Errorf("a second run of the same tick made %d snapshots", n)
	}
	// Retain 2 holds over later ticks; concurrency 2 is never exceeded.
	e.runJob(t, kubeconfig, "snap", "2026-11-22T02:00:00Z")
	out = e.runJob(t, kubeconfig, "snap", "2026-11-22T03:00:00Z")
	if !strings.Contains(out, "max-in-flight=") || strings.Contains(out, "max-in-flight=3") || strings.Contains(out, "max-in-flight=4") {
		t.Errorf("concurrency exceeded: %s", out)
	}
	for _, v := range []string{"by-job", "by-group", "by-default"} {
		if n := e.jobSnapshots(t, v, "snap"); n != 2 {
			t.Errorf("%s keeps %d job snapshots, want retain 2", v, n)
		}
	}

	// A detached volume runs once the setting allows it, and ends detached.
	e.call(t, "PUT", "/v1/settings/allow-recurring-job-while-volume-detached", `{"value":"true"}`).expect(t, 200)
	eventually(t, 10*time.Second, "setting cached", func() (bool, error) {
		return strings.Contains(e.call(t, "GET", "/v1/settings/allow-recurring-job-while-volume-detached", "").raw, `"value":"true"`), nil
	})
	out = e.runJob(t, kubeconfig, "snap", "2026-11-22T04:00:00Z")
	if !strings.Contains(out, "succeeded=4 failed=0 skipped=0") {
		t.Fatalf("run with detached volumes allowed: %s", out)
	}
	e.waitVolume(t, "asleep", "back to detached", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/asleep?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	e.waitVolume(t, "asleep", "attached to look", func(m map[string]any) bool { return m["state"] == "attached" })
	if n := e.jobSnapshots(t, "asleep", "snap"); n != 1 {
		t.Errorf("the detached volume has %d job snapshots", n)
	}

	// A job that no longer exists ends the run cleanly.
	if out := e.runJob(t, kubeconfig, "gone", "2026-11-22T05:00:00Z"); !strings.Contains(out, "succeeded=0") {
		t.Errorf("a missing job: %s", out)
	}
	events, err := e.kube.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
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
	e := newAPIEnv(t)
	kubeconfig := serviceAccountKubeconfig(t, e.cluster, e.ns)
	target := "file://" + t.TempDir()
	e.call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).expect(t, 200)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":1}`).expect(t, 200)
	eventually(t, 10*time.Second, "job and setting cached", func() (bool, error) {
		return e.call(t, "GET", "/v1/recurringjobs/nightly", "").status == 200 &&
			strings.Contains(e.call(t, "GET", "/v1/settings/backup-target", "").raw, target), nil
	})
	e.call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"nightly"}]}`).expect(t, 200)
	e.waitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/db?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolume(t, "db", "attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	qemuIO(t, v["endpoint"].(string), "write -P 0x77 0 1M", "flush")

	for i, tick := range []string{"2026-11-22T01:00:00Z", "2026-11-22T01:00:00Z", "2026-11-23T01:00:00Z"} {
		if out := e.runJob(t, kubeconfig, "nightly", tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run %d: %s", i, out)
		}
	}
	var url string
	eventually(t, 30*time.Second, "exactly one job backup kept", func() (bool, error) {
		r := e.call(t, "POST", "/v1/backupvolumes/db?action=backupList", "")
		if r.status != 200 {
			return false, nil
		}
		data := r.body["data"].([]any)
		if len(data) != 1 {
			return false, nil
		}
		b := data[0].(map[string]any)
		url, _ = b["url"].(string)
		return b["state"] == "Completed" && b["labels"].(map[string]any)["RecurringJob"] == "nightly", nil
	})
	if n := e.jobSnapshots(t, "db", "nightly"); n != 1 {
		t.Errorf("the backup job keeps %d snapshots, want the newest only", n)
	}
	e.call(t, "POST", "/v1/volumes", `{"name":"db-copy","size":"4Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).expect(t, 200)
	eventually(t, 30*time.Second, "restored", func() (bool, error) {
		vol, err := e.lh.LonghornV1beta2().Volumes(e.ns).Get(context.Background(), "db-copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	e.call(t, "POST", "/v1/volumes/db-copy?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	c := e.waitVolume(t, "db-copy", "copy attached", func(m map[string]any) bool { return m["state"] == "attached" && m["endpoint"] != "" })
	qemuIO(t, c["endpoint"].(string), "read -P 0x77 0 1M")
}

func TestSuspendTimeZoneAndSkipImmediatelyOnTheCronJobRunner(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"paris","task":"snapshot","cron":"0 2 * * *","retain":1,"timeZone":"Mars/Base"}`).expect(t, 400, "spec.timeZone")
	e.call(t, "POST", "/v1/recurringjobs", `{"name":"paris","task":"snapshot","cron":"0 2 * * *","retain":1,"timeZone":"Europe/Paris","suspend":true,"startingDeadlineSeconds":600}`).expect(t, 200)
	e.waitCronJob(t, "paris", "CronJob with zone, suspension and deadline", func(cj *batchv1.CronJob) bool {
		return *cj.Spec.TimeZone == "Europe/Paris" && *cj.Spec.Suspend && cj.Spec.StartingDeadlineSeconds != nil && *cj.Spec.StartingDeadlineSeconds == 600
	})
	// The manager records the suspension it saw, and leaves the spec as
	// written: skipImmediately stays unset (the daemon's default applies).
	eventually(t, 10*time.Second, "suspension observed, spec untouched", func() (bool, error) {
		j, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), "paris", metav1.GetOptions{})
		return err == nil && j.Status.ObservedSuspend != nil && *j.Status.ObservedSuspend && j.Spec.SkipImmediately == nil && j.Status.LastSkipped == nil, nil
	})

	// Resume with skipImmediately: the tick due now is skipped, and the
	// field stays true (a standing choice, never written back).
	e.call(t, "PUT", "/v1/recurringjobs/paris", `{"suspend":false,"skipImmediately":true}`).expect(t, 200)
	var skipped time.Time
	eventually(t, 15*time.Second, "skip recorded", func() (bool, error) {
		j, err := e.lh.LonghornV1beta2().RecurringJobs(e.ns).Get(context.Background(), "paris", metav1.GetOptions{})
		if err != nil || j.Status.LastSkipped == nil || j.Status.ObservedSuspend == nil || *j.Status.ObservedSuspend {
			return false, err
		}
		if j.Spec.SkipImmediately == nil || !*j.Spec.SkipImmediately {
			t.Fatalf("spec.skipImmediately written back: %v", j.Spec.SkipImmediately)
		}
		skipped = j.Status.LastSkipped.Time
		return true, nil
	})
	e.waitCronJob(t, "paris", "CronJob resumed", func(cj *batchv1.CronJob) bool { return !*cj.Spec.Suspend })
	// A run for a tick not after the skip does nothing.
	out := e.runJob(t, serviceAccountKubeconfig(t, e.cluster, e.ns), "paris", skipped.Add(-time.Minute).UTC().Format(time.RFC3339))
	if !strings.Contains(out, "succeeded=0 failed=0 skipped=0") {
		t.Fatalf("a run for a skipped tick: %s", out)
	}
}
