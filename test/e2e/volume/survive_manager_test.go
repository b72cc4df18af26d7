//go:build e2e

package volume

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestVolumeSurvivesManagerKill is issue 47's first proof: with its
// engines in the instance manager (--instance-manager-runner=process), a
// volume keeps its NBD connection and every acknowledged write while the
// manager is SIGKILLed and started again three times, and the manager
// that comes back adopts its engine (same instance manager, same
// endpoint) and reports the volume as it is; then again when the manager
// is stopped and replaced by a newer build. Not parallel: the writes
// made while the manager is down are counted over timed windows.
func TestVolumeSurvivesManagerKill(t *testing.T) {
	v := attachOnInstanceManager(t)
	d, e, endpoint, im := v.d, v.e, v.endpoint, v.im
	w := framework.StartNBDWriter(t, endpoint, imVolumeSize, framework.NBDWriterOptions{Interval: time.Millisecond})
	defer w.Stop()
	writesGoOn(t, w, "with the first manager")
	for i := 1; i <= 3; i++ {
		d.Kill(t)
		atKill := w.Counts()
		time.Sleep(2 * time.Second) // the node without a manager
		atRestart := w.Counts()
		if atRestart.Errors > 0 || atRestart.Acked == atKill.Acked {
			t.Fatalf("kill %d: while the manager was down, %d writes acknowledged, %d errors (first: %v)",
				i, atRestart.Acked-atKill.Acked, atRestart.Errors, atRestart.FirstError)
		}
		t.Logf("kill %d: %d writes acknowledged while the manager was down", i, atRestart.Acked-atKill.Acked)
		d.Launch(t, fmt.Sprintf("daemon-%d.log", i))
		what := fmt.Sprintf("the volume's status after restart %d (log %s)", i, d.LogPath())
		framework.EventuallyAgree(t, 30*time.Second, what, func() string { return statusProblems(t, e, endpoint) })
		if got := framework.InstanceManagerPID(t, d.DataDir()); got != im {
			t.Fatalf("restart %d: the instance manager is pid %d, was %d: not adopted", i, got, im)
		}
		// The manager may act on the engine a while after it reports it:
		// the status must stay right while the writes go on.
		writesGoOn(t, w, fmt.Sprintf("after restart %d", i))
		if p := statusProblems(t, e, endpoint); p != "" {
			t.Fatalf("%s, once settled: %s", what, p)
		}
	}

	// An upgrade: the manager stopped as a DaemonSet's rollout stops it
	// (SIGTERM) and replaced by a newer build, which adopts the instance
	// manager of the old one.
	d.Stop(t)
	d.UseBinary(framework.BuildManagerVersion(t, "v-next"))
	d.Launch(t, "daemon-next.log")
	what := fmt.Sprintf("the volume's status under the newer build (log %s)", d.LogPath())
	framework.EventuallyAgree(t, 30*time.Second, what, func() string { return statusProblems(t, e, endpoint) })
	if got := framework.InstanceManagerPID(t, d.DataDir()); got != im {
		t.Fatalf("the newer build runs instance manager %d, was %d: not adopted", got, im)
	}
	writesGoOn(t, w, "under the newer build")

	c := w.Stop()
	t.Logf("writer: %d writes acknowledged, %d errors", c.Acked, c.Errors)
	if c.Errors != 0 {
		t.Errorf("the writer saw %d I/O errors (first: %v)", c.Errors, c.FirstError)
	}
	w.Verify(t)

	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "volume detached", func(v map[string]any) bool { return v["state"] == "detached" })
	d.Stop(t)
	framework.StopInstanceManager(t, d.DataDir())
	if pid := framework.InstanceManagerPID(t, d.DataDir()); pid != 0 {
		t.Errorf("the instance manager (pid %d) still runs", pid)
	}
}

// writesGoOn waits until the writer has had 500 more writes acknowledged,
// failing on its first error.
func writesGoOn(t *testing.T, w *framework.NBDWriter, when string) {
	t.Helper()
	from := w.Counts().Acked
	framework.Eventually(t, 30*time.Second, "writes acknowledged "+when, func() (bool, error) {
		c := w.Counts()
		if c.Errors > 0 {
			return false, fmt.Errorf("%d I/O errors (first: %v)", c.Errors, c.FirstError)
		}
		return c.Acked >= from+500, nil
	})
}

// statusProblems says what is wrong with the attached volume's status, as
// the API and the Volume, Engine and Replica objects show it ("" for
// nothing).
func statusProblems(t *testing.T, e *framework.APIEnv, endpoint string) string {
	t.Helper()
	var p []string
	want := func(what string, got, want any) {
		if got != want {
			p = append(p, fmt.Sprintf("%s %v, want %v", what, got, want))
		}
	}
	r := e.Call(t, "GET", "/v1/volumes/vol", "")
	if r.Status != 200 {
		return fmt.Sprintf("GET /v1/volumes/vol: %d %s", r.Status, r.Raw)
	}
	for _, f := range []struct{ field, want string }{{"state", "attached"}, {"robustness", "healthy"}, {"currentNodeID", "node-1"}, {"endpoint", endpoint}} {
		want("API "+f.field, r.Body[f.field], f.want)
	}
	controllers, _ := r.Body["controllers"].([]any)
	if len(controllers) != 1 {
		p = append(p, fmt.Sprintf("API controllers %v, want one", r.Body["controllers"]))
	} else {
		ctl, _ := controllers[0].(map[string]any)
		want("API controllers[0].endpoint", ctl["endpoint"], endpoint)
		want("API controllers[0].running", ctl["running"], true)
	}

	ctx := context.Background()
	lh := e.LH.LonghornV1beta2()
	if vol, err := lh.Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{}); err != nil {
		p = append(p, err.Error())
	} else {
		want("Volume status.state", string(vol.Status.State), "attached")
		want("Volume status.robustness", string(vol.Status.Robustness), "healthy")
		want("Volume status.currentNodeID", vol.Status.CurrentNodeID, "node-1")
	}
	if eng, err := lh.Engines(e.NS).Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{}); err != nil {
		p = append(p, err.Error())
	} else {
		want("Engine status.currentState", string(eng.Status.CurrentState), "running")
		want("Engine status.endpoint", eng.Status.Endpoint, endpoint)
	}
	if list, err := lh.Replicas(e.NS).List(ctx, metav1.ListOptions{}); err != nil {
		p = append(p, err.Error())
	} else if len(list.Items) != 1 {
		p = append(p, fmt.Sprintf("%d replicas, want 1", len(list.Items)))
	} else {
		want("Replica status.currentState", string(list.Items[0].Status.CurrentState), "running")
	}
	return strings.Join(p, "; ")
}
