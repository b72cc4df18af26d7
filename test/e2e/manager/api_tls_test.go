//go:build e2e

package manager

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/app"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The API over TLS (--api-tls, as package/ deploys it), so a caller's
// bearer token never crosses the pod network in the clear: a request in
// the clear reaches no handler, a client that does not trust the
// cluster's internal CA refuses the API's certificate, and the callers
// that check it with the CA's certificates the managers publish (the
// ConfigMap longhorn-internal-ca-cert) work: a CronJob pod's run. The
// manager runner calls its own API in process: none of its requests
// reaches the port.
func TestTheAPIOverTLS(t *testing.T) {
	t.Parallel()
	var overNetwork sync.Map // "METHOD path" of each request on the API's port
	e, _ := framework.NewRunnerEnv(t, func(o *app.DaemonOptions) {
		o.APITLS = true
		o.Hooks.OnAPIRequestOverNetwork = func(r *http.Request) { overNetwork.Store(r.Method+" "+r.URL.Path, true) }
	})
	plain := e.Base
	caFile := e.UseAPITLS(t)

	resp, err := http.Get(plain + "/v1/volumes")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS server") {
		t.Errorf("a request in the clear: %d %s, want the TLS server's 400", resp.StatusCode, body)
	}
	if _, err := http.Get(e.Base + "/v1/volumes"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a client that does not trust the cluster's CA: %v, want the certificate refused", err)
	}
	e.Call(t, "GET", "/v1/volumes", "").Expect(t, 200)

	// A CronJob pod's run, checking the API with the mounted CA file. The
	// job never ticks while the test runs: only this run takes a snapshot.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"yearly","task":"snapshot","cron":"0 0 1 1 *","retain":2}`).Expect(t, 200)
	e.AttachedVolume(t, "by-pod", "yearly")
	tick := "2026-11-26T01:00:00Z"
	if out := e.RunJob(t, framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS), "yearly", tick, "--manager-ca-file", caFile); !strings.Contains(out, "succeeded=1 failed=0") {
		t.Fatalf("a run over TLS: %s", out)
	}
	if n := e.TickSnapshots(t, "by-pod", time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)); n != 1 {
		t.Errorf("%d snapshots of the run over TLS, want 1", n)
	}

	// The manager runner's run, whose snapshot calls (snapshotCreate of
	// the volume, its snapshot list) none of the test's own calls makes.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"minutely","task":"snapshot","cron":"* * * * *","retain":2,"suspend":true}`).Expect(t, 200)
	e.AttachedVolume(t, "by-manager", "minutely")
	overNetwork.Clear()
	e.Call(t, "PUT", "/v1/recurringjobs/minutely", `{"suspend":false}`).Expect(t, 200)
	job := e.WaitJob(t, "minutely", "a run of the manager runner", 100*time.Second, func(j *longhorn.RecurringJob) bool {
		return j.Status.LastScheduleTime != nil && j.Status.LastSuccessfulTime != nil && len(j.Status.Active) == 0
	})
	if _, seen := overNetwork.Load("PUT /v1/recurringjobs/minutely"); !seen {
		t.Error("the port's requests are not seen: the test's own call is not among them")
	}
	overNetwork.Range(func(k, _ any) bool {
		if k != "PUT /v1/recurringjobs/minutely" {
			t.Errorf("the API's port served %s while the manager runner ran: its calls are made in process", k)
		}
		return true
	})
	if n := e.TickSnapshots(t, "by-manager", job.Status.LastScheduleTime.Time); n != 1 {
		t.Errorf("%d snapshots of the manager runner's run, want 1", n)
	}
}
