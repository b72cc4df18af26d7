package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func testDefaultTarget() *longhorn.BackupTarget {
	return &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: testNamespace},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "s3://backups@us-east-1/", CredentialSecret: "s3-secret", PollInterval: metav1.Duration{Duration: 300 * time.Second}},
		Status: longhorn.BackupTargetStatus{Available: false, Conditions: []longhorn.Condition{{Type: longhorn.BackupTargetConditionTypeUnavailable,
			Status: longhorn.ConditionStatusTrue, Message: "cannot read s3://backups@us-east-1/: access denied"}}}}
}

// TestBackupTargetsListAndGet: the objects, in Longhorn's shape (the
// poll interval as a duration, the Unavailable condition's message).
func TestBackupTargetsListAndGet(t *testing.T) {
	s := newTestServer(t, testDefaultTarget())
	code, body, raw := s.do(t, "GET", "/v1/backuptargets", "")
	if code != http.StatusOK || body["resourceType"] != "backupTarget" {
		t.Fatalf("GET /v1/backuptargets: %d %s", code, raw)
	}
	data := body["data"].([]any)
	if len(data) != 1 {
		t.Fatalf("data %s", raw)
	}
	bt := data[0].(map[string]any)
	for k, want := range map[string]any{"id": "default", "type": "backupTarget", "name": "default", "backupTargetURL": "s3://backups@us-east-1/",
		"credentialSecret": "s3-secret", "pollInterval": "5m0s", "available": false, "message": "cannot read s3://backups@us-east-1/: access denied"} {
		if bt[k] != want {
			t.Errorf("%s: %v, want %v (%s)", k, bt[k], want, raw)
		}
	}
	if _, ok := bt["actions"].(map[string]any)["backupTargetUpdate"]; !ok {
		t.Errorf("no backupTargetUpdate action: %s", raw)
	}
	if code, body, raw := s.do(t, "GET", "/v1/backuptargets/default", ""); code != http.StatusOK || body["backupTargetURL"] != "s3://backups@us-east-1/" {
		t.Errorf("GET default: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "GET", "/v1/backuptargets/offsite", ""); code != http.StatusNotFound {
		t.Errorf("GET a missing target: %d %s", code, raw)
	}
}

// TestBackupTargetWrites: create, update (PUT and Longhorn's
// backupTargetUpdate action), delete, and what each refuses, naming the
// field and the rule.
func TestBackupTargetWrites(t *testing.T) {
	s := newTestServer(t, testDefaultTarget())
	spec := func(name string) longhorn.BackupTargetSpec {
		t.Helper()
		bt, err := s.lh.LonghornV1beta2().BackupTargets(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return bt.Spec
	}

	code, body, raw := s.do(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file:///mnt/offsite","credentialSecret":"","pollInterval":"60"}`)
	if code != http.StatusOK || body["pollInterval"] != "1m0s" {
		t.Fatalf("create: %d %s", code, raw)
	}
	if got := spec("offsite"); got.BackupTargetURL != "file:///mnt/offsite" || got.PollInterval.Duration != time.Minute {
		t.Errorf("created spec %+v", got)
	}
	if code, _, raw := s.do(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file:///x","pollInterval":"60"}`); code != http.StatusConflict {
		t.Errorf("create twice: %d %s", code, raw)
	}

	// Longhorn's UI sends back what it listed, with the edited fields:
	// the resource's links and actions, pollInterval as a duration.
	code, _, raw = s.do(t, "POST", "/v1/backuptargets/default?action=backupTargetUpdate",
		`{"id":"default","type":"backupTarget","links":{"self":"x"},"actions":{"backupTargetUpdate":"x"},"available":false,"message":"",`+
			`"name":"default","backupTargetURL":"s3://other@eu-west-1/","credentialSecret":"s3-secret","pollInterval":"5m0s"}`)
	if code != http.StatusOK {
		t.Fatalf("backupTargetUpdate: %d %s", code, raw)
	}
	if got := spec("default"); got.BackupTargetURL != "s3://other@eu-west-1/" || got.PollInterval.Duration != 5*time.Minute {
		t.Errorf("updated spec %+v", got)
	}
	if code, _, raw := s.do(t, "PUT", "/v1/backuptargets/offsite", `{"backupTargetURL":"","pollInterval":"0"}`); code != http.StatusOK {
		t.Errorf("PUT: %d %s", code, raw)
	}

	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		says                     string
	}{
		{"a URL of a scheme the project does not support", "POST", "/v1/backuptargets", `{"name":"x","backupTargetURL":"ftp://host/","pollInterval":"300"}`, 400, "must start with s3://, nfs://, cifs://, azblob:// or file://"},
		{"an s3 URL without a region", "POST", "/v1/backuptargets/default?action=backupTargetUpdate", `{"backupTargetURL":"s3://bucket","pollInterval":"300"}`, 400, "backupTargetURL: "},
		{"a negative poll interval", "POST", "/v1/backuptargets", `{"name":"x","backupTargetURL":"","pollInterval":"-5"}`, 400, "pollInterval: -5s must not be negative"},
		{"a poll interval that is not a number", "POST", "/v1/backuptargets", `{"name":"x","pollInterval":"often"}`, 400, "must be a number of seconds (300) or a duration"},
		{"a Secret name that is not one", "POST", "/v1/backuptargets", `{"name":"x","credentialSecret":"S3 Secret","pollInterval":"300"}`, 400, "credentialSecret: "},
		{"no name", "POST", "/v1/backuptargets", `{"pollInterval":"300"}`, 400, "name: required"},
		{"a body naming another target", "PUT", "/v1/backuptargets/offsite", `{"name":"default","pollInterval":"300"}`, 400, "name: "},
		{"an update of a missing target", "PUT", "/v1/backuptargets/nowhere", `{"pollInterval":"300"}`, 404, "not found"},
		{"an unknown action", "POST", "/v1/backuptargets/default?action=backupTargetSync", `{}`, 400, "backupTargetUpdate"},
		{"deleting default", "DELETE", "/v1/backuptargets/default", "", 400, "the default backup target cannot be deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, raw := s.do(t, tc.method, tc.path, tc.body)
			if code != tc.code || !strings.Contains(raw, tc.says) {
				t.Errorf("%s %s: %d %s; want %d saying %q", tc.method, tc.path, code, raw, tc.code, tc.says)
			}
		})
	}
	if got := spec("default"); got.BackupTargetURL != "s3://other@eu-west-1/" {
		t.Errorf("a refused request changed default: %+v", got)
	}

	if code, _, raw := s.do(t, "DELETE", "/v1/backuptargets/offsite", ""); code != http.StatusNoContent {
		t.Errorf("delete: %d %s", code, raw)
	}
	if _, err := s.lh.LonghornV1beta2().BackupTargets(testNamespace).Get(context.Background(), "offsite", metav1.GetOptions{}); err == nil {
		t.Error("offsite still there")
	}
}

// Two targets may not share a place (as in Longhorn, which compares
// URLs): a backup's URL names one target, whose credential opens it, and
// a second target on the same folder or bucket would show, and delete,
// the first one's backups. The same place written another way is the
// same place, whether a BackupTarget or the backup-target setting asks;
// a target keeps its own URL on update.
func TestBackupTargetURLTaken(t *testing.T) {
	s := newTestServer(t, testDefaultTarget(),
		&longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: "backup-target", Namespace: testNamespace}, Value: "s3://backups@us-east-1/"})
	if code, _, raw := s.do(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file:///mnt/offsite","pollInterval":"60"}`); code != http.StatusOK {
		t.Fatalf("create offsite: %d %s", code, raw)
	}
	eventually(t, "offsite in the cache", func() bool { _, err := s.server.ds.GetBackupTargetRO("offsite"); return err == nil })
	for _, url := range []string{"file:///mnt/offsite/", "file://localhost/mnt/offsite", "file:///mnt/x/../offsite"} {
		code, body, raw := s.do(t, "POST", "/v1/backuptargets", `{"name":"second","backupTargetURL":"`+url+`","pollInterval":"60"}`)
		if code != http.StatusBadRequest || !strings.HasPrefix(body["message"].(string), "backupTargetURL: "+url+" is backup target offsite's already") {
			t.Errorf("a second target at %s: %d %s", url, code, raw)
		}
		code, body, raw = s.do(t, "PUT", "/v1/settings/backup-target", `{"value":"`+url+`"}`)
		if code != http.StatusBadRequest || !strings.Contains(body["message"].(string), "value: "+url+" is backup target offsite's already") {
			t.Errorf("the backup-target setting at %s: %d %s", url, code, raw)
		}
	}
	// default's URL (the setting's, s3://backups@us-east-1/) in another
	// region is the same bucket.
	code, body, raw := s.do(t, "POST", "/v1/backuptargets", `{"name":"second","backupTargetURL":"s3://backups@eu-west-1","credentialSecret":"s3-secret","pollInterval":"60"}`)
	if code != http.StatusBadRequest || !strings.Contains(body["message"].(string), "is backup target default's already") {
		t.Errorf("a second target on default's bucket: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "PUT", "/v1/backuptargets/offsite", `{"backupTargetURL":"file:///mnt/offsite","pollInterval":"120"}`); code != http.StatusOK {
		t.Errorf("offsite updated on its own URL: %d %s", code, raw)
	}
}
