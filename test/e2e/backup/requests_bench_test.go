//go:build e2e

package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// call is APIEnv.Call for a benchmark.
func call(b *testing.B, e *framework.APIEnv, method, path, body string) map[string]any {
	b.Helper()
	req, err := http.NewRequest(method, e.Base+path, strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		b.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out
}

// BenchmarkDaemonTargetRequests is the measurement, through the
// daemon: 4 attached volumes with a backup each in an S3 target
// (versitygw, requests counted by a proxy), then a minute idle and a
// minute of a snapshot of every volume every 10 s, with the default
// backupstore-poll-interval. It reports the requests in each minute (the
// issue counted 54 and 144 before). Each phase is a minute of wall
// clock: nothing is asserted of time.
func BenchmarkDaemonTargetRequests(b *testing.B) {
	srv := s3test.Start(b)
	counter := srv.Counter(b)
	e := framework.NewAPIEnv(b)
	const volumes = 4
	for v := 0; v < volumes; v++ {
		name := fmt.Sprintf("bench-%d", v)
		call(b, e, "POST", "/v1/volumes", `{"name":"`+name+`","size":"8Mi","numberOfReplicas":1}`)
		call(b, e, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`)
		framework.Eventually(b, 30*time.Second, name+" attached", func() (bool, error) {
			return call(b, e, "GET", "/v1/volumes/"+name, "")["state"] == "attached", nil
		})
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-secret"}, StringData: counter.Credential()}
	if _, err := e.Kube.CoreV1().Secrets(e.NS).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	framework.GrantSecret(b, e.Cluster, e.Kube, e.NS, "s3-secret")
	call(b, e, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`)
	call(b, e, "PUT", "/v1/settings/backup-target", `{"value":"`+srv.Target("")+`"}`)
	for v := 0; v < volumes; v++ {
		name := fmt.Sprintf("bench-%d", v)
		call(b, e, "POST", "/v1/volumes/"+name+"?action=snapshotCreate", `{"name":"first"}`)
		backup := call(b, e, "POST", "/v1/volumes/"+name+"?action=snapshotBackup", `{"name":"first"}`)["name"].(string)
		framework.Eventually(b, 30*time.Second, backup+" Completed", func() (bool, error) {
			bk, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), backup, metav1.GetOptions{})
			return err == nil && bk.Status.State == "Completed", nil
		})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		counter.Reset()
		time.Sleep(time.Minute)
		idle := counter.Count()
		counter.Reset()
		for step := 0; step < 6; step++ {
			for v := 0; v < volumes; v++ {
				call(b, e, "POST", fmt.Sprintf("/v1/volumes/bench-%d?action=snapshotCreate", v), fmt.Sprintf(`{"name":"s-%d-%d"}`, i, step))
			}
			time.Sleep(10 * time.Second)
		}
		snapshots := counter.Count()
		b.ReportMetric(float64(idle), "requests/idle-min")
		b.ReportMetric(float64(snapshots), "requests/snapshot-min")
	}
}
