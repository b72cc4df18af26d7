//go:build e2e

package backup

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// listedEnv is a daemon backing up to an S3 server through a counting
// proxy, with a poll interval so long that no poll of the target can be
// what lists a backup: only what the manager does when its engine
// reports a backup finished can.
type listedEnv struct {
	e       *framework.APIEnv
	counter *s3test.Counter
}

// longPoll is the backupstore-poll-interval of these tests, in seconds.
const longPoll = "300"

func newListedEnv(tb testing.TB, opts ...func(*app.DaemonOptions)) *listedEnv {
	tb.Helper()
	srv := s3test.Start(tb)
	env := &listedEnv{e: framework.NewAPIEnv(tb, opts...), counter: srv.Counter(tb)}
	env.call(tb, "PUT", "/v1/settings/backupstore-poll-interval", `{"value":"`+longPoll+`"}`, 200)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-secret"}, StringData: env.counter.Credential()}
	if _, err := env.e.Kube.CoreV1().Secrets(env.e.NS).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	framework.GrantSecret(tb, env.e.Cluster, env.e.Kube, env.e.NS, "s3-secret")
	env.call(tb, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`, 200)
	env.call(tb, "PUT", "/v1/settings/backup-target", `{"value":"`+srv.Target("")+`"}`, 200)
	return env
}

// call sends one API request and fails unless it is answered want (any
// status below 300 when want is 0).
func (env *listedEnv) call(tb testing.TB, method, path, body string, want int) map[string]any {
	tb.Helper()
	status, out := env.try(tb, method, path, body)
	if (want == 0 && status >= 300) || (want != 0 && status != want) {
		tb.Fatalf("%s %s: %d %v", method, path, status, out)
	}
	return out
}

func (env *listedEnv) try(tb testing.TB, method, path, body string) (int, map[string]any) {
	tb.Helper()
	req, err := http.NewRequest(method, env.e.Base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// attach makes an attached volume of size and returns its NBD endpoint.
func (env *listedEnv) attach(tb testing.TB, name, size string) string {
	tb.Helper()
	env.call(tb, "POST", "/v1/volumes", `{"name":"`+name+`","size":"`+size+`","numberOfReplicas":1}`, 0)
	env.call(tb, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`, 0)
	var endpoint string
	framework.Eventually(tb, 30*time.Second, name+" attached", func() (bool, error) {
		v := env.call(tb, "GET", "/v1/volumes/"+name, "", 200)
		endpoint, _ = v["endpoint"].(string)
		return v["state"] == "attached" && endpoint != "", nil
	})
	return endpoint
}

// backupTiming is one backup's times: when snapshotBackup was answered,
// when the engine ended it (its last request to the target, the DELETE
// of its lock, was answered), and when the API first listed it
// Completed under its backup volume.
type backupTiming struct {
	name                   string
	started, ended, listed time.Time
}

// engine is the engine's own time for the backup; listedAfter the time
// from its end to its listing.
func (b backupTiming) engine() time.Duration      { return b.ended.Sub(b.started) }
func (b backupTiming) listedAfter() time.Duration { return b.listed.Sub(b.ended) }

// backup takes a snapshot of volume and backs it up, then asks the API's
// backupList every 5 ms until it lists the backup Completed. A backup
// listed in any other final state fails the test.
func (env *listedEnv) backup(tb testing.TB, volume, snapshot string) backupTiming {
	tb.Helper()
	env.call(tb, "POST", "/v1/volumes/"+volume+"?action=snapshotCreate", `{"name":"`+snapshot+`"}`, 0)
	b := backupTiming{}
	b.name = env.call(tb, "POST", "/v1/volumes/"+volume+"?action=snapshotBackup", `{"name":"`+snapshot+`"}`, 0)["name"].(string)
	b.started = time.Now()
	deadline := b.started.Add(60 * time.Second)
	for b.listed.IsZero() {
		if time.Now().After(deadline) {
			tb.Fatalf("backup %s of %s not listed Completed within 60 s", b.name, volume)
		}
		status, out := env.try(tb, "POST", "/v1/backupvolumes/"+volume+"?action=backupList", "")
		if status == 200 {
			for _, item := range out["data"].([]any) {
				if bk := item.(map[string]any); bk["name"] == b.name {
					switch bk["state"] {
					case "Completed":
						b.listed = time.Now()
					case "Error":
						tb.Fatalf("backup %s listed in Error: %v", b.name, bk["error"])
					}
				}
			}
		}
		if b.listed.IsZero() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The config is written before the lock is released: a backup
	// listed in between (ended after listed) is measured all the same.
	framework.Eventually(tb, 10*time.Second, "the lock of backup "+b.name+" released", func() (bool, error) {
		ended, ok := env.counter.LastEnded("DELETE", "backupstore/volumes/"+volume+"/locks/backup-")
		b.ended = ended
		return ok && ended.After(b.started), nil
	})
	return b
}
