package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// A backup job names its BackupTarget (spec.backupTargetName, not
// Longhorn's): an existing one is stored and shown, one that does not
// exist is refused with 400 naming the field, and the job is left as it
// was; a snapshot job naming one is refused too.
func TestRecurringJobBackupTarget(t *testing.T) {
	offsite := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite", Namespace: testNamespace},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "s3://offsite@us-east-1/"}}
	s := newTestServer(t, offsite)
	code, body, raw := s.do(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":3,"backupTargetName":"offsite"}`)
	if code != http.StatusOK || body["backupTargetName"] != "offsite" {
		t.Fatalf("create naming offsite: %d %s", code, raw)
	}
	job, err := s.lh.LonghornV1beta2().RecurringJobs(testNamespace).Get(context.Background(), "nightly", metav1.GetOptions{})
	if err != nil || job.Spec.BackupTargetName != "offsite" {
		t.Fatalf("stored: %+v, %v", job, err)
	}
	code, body, raw = s.do(t, "POST", "/v1/recurringjobs", `{"name":"lost","task":"backup","cron":"@daily","retain":3,"backupTargetName":"nowhere"}`)
	if code != http.StatusBadRequest || !strings.Contains(body["message"].(string), `spec.backupTargetName: BackupTarget "nowhere" does not exist`) {
		t.Errorf("create naming a target that does not exist: %d %s", code, raw)
	}
	code, _, raw = s.do(t, "POST", "/v1/recurringjobs", `{"name":"snap","task":"snapshot","cron":"@daily","retain":3,"backupTargetName":"offsite"}`)
	if code != http.StatusBadRequest || !strings.Contains(raw, "spec.backupTargetName") {
		t.Errorf("a snapshot job naming a target: %d %s", code, raw)
	}
	eventually(t, "the job in the cache", func() bool { _, err := s.server.ds.GetRecurringJobRO("nightly"); return err == nil })
	code, _, raw = s.do(t, "PUT", "/v1/recurringjobs/nightly", `{"backupTargetName":"nowhere"}`)
	if code != http.StatusBadRequest || !strings.Contains(raw, "spec.backupTargetName") {
		t.Errorf("update naming a target that does not exist: %d %s", code, raw)
	}
	if job, _ := s.lh.LonghornV1beta2().RecurringJobs(testNamespace).Get(context.Background(), "nightly", metav1.GetOptions{}); job.Spec.BackupTargetName != "offsite" {
		t.Errorf("the refused update changed the job: %q", job.Spec.BackupTargetName)
	}
	if code, body, raw := s.do(t, "PUT", "/v1/recurringjobs/nightly", `{"backupTargetName":""}`); code != http.StatusOK || body["backupTargetName"] != "" {
		t.Errorf("update back to each volume's own target: %d %s", code, raw)
	}
}
