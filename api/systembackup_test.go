package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestSystemBackupsAndRestoresAsLonghornsUIUsesThem: create, list, get
// and delete, in Longhorn's shape (an Error condition as "reason:
// message"), and what a create refuses, naming the field.
func TestSystemBackupsAndRestoresAsLonghornsUIUsesThem(t *testing.T) {
	failed := &longhorn.SystemBackup{ObjectMeta: metav1.ObjectMeta{Name: "failed", Namespace: testNamespace},
		Status: longhorn.SystemBackupStatus{State: longhorn.SystemBackupStateError, Version: "v1.9.0",
			Conditions: []longhorn.Condition{{Type: longhorn.SystemBackupConditionTypeError, Status: longhorn.ConditionStatusTrue,
				Reason: longhorn.SystemBackupConditionReasonUpload, Message: "access denied"}}}}
	s := newTestServer(t, failed, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: "backup-target", Namespace: testNamespace}})

	code, _, raw := s.do(t, "POST", "/v1/systembackups", `{"name":"sb","volumeBackupPolicy":"if-not-present"}`)
	if code != http.StatusBadRequest || !strings.Contains(raw, "backup-target") {
		t.Errorf("a system backup with no backup target: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "PUT", "/v1/settings/backup-target", `{"value":"file:///backups"}`); code != http.StatusOK {
		t.Fatalf("set the backup target: %d %s", code, raw)
	}
	eventually(t, "the backup target in the cache", func() bool {
		_, body, _ := s.do(t, "GET", "/v1/settings/backup-target", "")
		return body["value"] == "file:///backups"
	})
	for body, field := range map[string]string{
		`{"name":"sb","volumeBackupPolicy":"sometimes"}`: "volumeBackupPolicy",
		`{"name":"Not_A_Name"}`:                          "name",
		`{"volumeBackupPolicy":"always"}`:                "name",
	} {
		if code, _, raw := s.do(t, "POST", "/v1/systembackups", body); code != http.StatusBadRequest || !strings.Contains(raw, field) {
			t.Errorf("POST %s: %d %s, want 400 naming %s", body, code, raw, field)
		}
	}
	code, body, raw := s.do(t, "POST", "/v1/systembackups", `{"name":"sb","volumeBackupPolicy":"disabled"}`)
	if code != http.StatusOK || body["type"] != "systemBackup" || body["volumeBackupPolicy"] != "disabled" {
		t.Fatalf("create: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "POST", "/v1/systembackups", `{"name":"sb"}`); code != http.StatusConflict {
		t.Errorf("create twice: %d %s", code, raw)
	}
	eventually(t, "both system backups listed", func() bool {
		_, body, _ := s.do(t, "GET", "/v1/systembackups", "")
		return body["resourceType"] == "systemBackup" && len(body["data"].([]any)) == 2
	})
	if _, body, raw := s.do(t, "GET", "/v1/systembackups/failed", ""); body["error"] != "Upload: access denied" || body["version"] != "v1.9.0" || body["state"] != "Error" {
		t.Errorf("a failed system backup: %s", raw)
	}

	if code, _, raw := s.do(t, "POST", "/v1/systemrestores", `{"name":"r","systemBackup":"missing"}`); code != http.StatusBadRequest || !strings.Contains(raw, "systemBackup") {
		t.Errorf("a restore of a missing system backup: %d %s", code, raw)
	}
	code, body, raw = s.do(t, "POST", "/v1/systemrestores", `{"name":"r","systemBackup":"sb"}`)
	if code != http.StatusOK || body["type"] != "systemRestore" || body["systemBackup"] != "sb" {
		t.Fatalf("create restore: %d %s", code, raw)
	}
	eventually(t, "the restore listed", func() bool {
		_, body, _ := s.do(t, "GET", "/v1/systemrestores/r", "")
		return body["name"] == "r"
	})
	if code, _, raw := s.do(t, "DELETE", "/v1/systemrestores/r", ""); code != http.StatusNoContent {
		t.Errorf("delete restore: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "DELETE", "/v1/systembackups/sb", ""); code != http.StatusNoContent {
		t.Errorf("delete: %d %s", code, raw)
	}
	if code, _, _ := s.do(t, "DELETE", "/v1/systembackups/sb", ""); code != http.StatusNotFound {
		t.Errorf("delete twice: %d", code)
	}
}

// TestASystemRestoreRecordsWhoAskedForIt: the restore creates its
// objects with the rights of whoever asked, so the API records its
// authenticated caller (their groups and extra too); with no caller
// checked (--api-auth=none), the manager's own account, whose rights the
// API lends every caller then.
func TestASystemRestoreRecordsWhoAskedForIt(t *testing.T) {
	sb := &longhorn.SystemBackup{ObjectMeta: metav1.ObjectMeta{Name: "sb", Namespace: testNamespace}}
	s := newTestServer(t, sb)
	eventually(t, "the system backup in the cache", func() bool { _, err := s.server.ds.GetSystemBackupRO("sb"); return err == nil })
	requester := func(name string) *longhorn.SystemRestoreRequester {
		t.Helper()
		sr, err := s.lh.LonghornV1beta2().SystemRestores(testNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sr.Spec.Requester
	}
	s.server.SetManagerServiceAccount("lh-manager")
	if code, _, raw := s.do(t, "POST", "/v1/systemrestores", `{"name":"unchecked","systemBackup":"sb"}`); code != http.StatusOK {
		t.Fatalf("create: %d %s", code, raw)
	}
	if got := requester("unchecked"); got == nil || got.Username != "system:serviceaccount:"+testNamespace+":lh-manager" || len(got.Groups) != 0 {
		t.Errorf("with no caller checked, requester %+v, want the manager's account", got)
	}

	f := &fakeReviews{allow: func(*authorizationv1.ResourceAttributes) bool { return true }}
	s.server.EnableKubernetesAuth(f.client(), testNamespace)
	req := httptest.NewRequest("POST", "/v1/systemrestores", strings.NewReader(`{"name":"checked","systemBackup":"sb"}`))
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("create as alice: %d %s", rec.Code, rec.Body)
	}
	if got := requester("checked"); got == nil || got.Username != "alice" || !slices.Equal(got.Groups, []string{"ops"}) {
		t.Errorf("requester %+v, want alice of ops, the authenticated caller", got)
	}

	// Through Longhorn's UI, a user its authenticating proxy names: the
	// UI's account impersonates them (allowed here), and the restore is
	// theirs, not the UI's.
	req = httptest.NewRequest("POST", "/v1/systemrestores", strings.NewReader(`{"name":"through-the-ui","systemBackup":"sb"}`))
	req.Header.Set("Authorization", "Bearer good")
	req.Header.Set("Impersonate-User", "bob")
	req.Header.Set("Impersonate-Group", "dev")
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("create as bob through the UI: %d %s", rec.Code, rec.Body)
	}
	if got := requester("through-the-ui"); got == nil || got.Username != "bob" || !slices.Contains(got.Groups, "dev") || slices.Contains(got.Groups, "ops") {
		t.Errorf("requester %+v, want bob of dev, the user impersonated", got)
	}
}
