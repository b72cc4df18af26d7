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

// A volume names the BackupTarget its backups go to
// (updateBackupTargetName, Longhorn's): an existing one is stored in
// spec.backupTargetName, none is default, and one that does not exist is
// refused naming the field, the volume left as it was.
func TestUpdateBackupTargetName(t *testing.T) {
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}}
	offsite := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite", Namespace: testNamespace},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "s3://offsite@us-east-1/"}}
	s := newTestServer(t, vol, offsite)
	eventually(t, "the volume in the cache", func() bool { _, err := s.server.ds.GetVolumeRO("vol"); return err == nil })
	_, body, _ := s.do(t, "GET", "/v1/volumes/vol", "")
	if _, ok := body["actions"].(map[string]any)["updateBackupTargetName"]; !ok {
		t.Error("the volume does not offer updateBackupTargetName")
	}
	if body["backupTargetName"] != "default" {
		t.Errorf("a volume naming no target shows %v, want default", body["backupTargetName"])
	}
	stored := func() string {
		v, err := s.lh.LonghornV1beta2().Volumes(testNamespace).Get(context.Background(), "vol", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return v.Spec.BackupTargetName
	}
	for _, tc := range []struct{ in, want string }{
		{`{"backupTargetName":"offsite"}`, "offsite"},
		{`{"backupTargetName":"default"}`, "default"},
		{`{}`, "default"},
	} {
		code, out, raw := s.do(t, "POST", "/v1/volumes/vol?action=updateBackupTargetName", tc.in)
		if code != http.StatusOK || out["backupTargetName"] != tc.want || stored() != tc.want {
			t.Errorf("%s: %d %s, stored %q; want %s", tc.in, code, raw, stored(), tc.want)
		}
	}
	code, out, raw := s.do(t, "POST", "/v1/volumes/vol?action=updateBackupTargetName", `{"backupTargetName":"nowhere"}`)
	if code != http.StatusBadRequest || !strings.HasPrefix(out["message"].(string), `backupTargetName: BackupTarget "nowhere" does not exist`) {
		t.Errorf("a target that does not exist: %d %s", code, raw)
	}
	if stored() != "default" {
		t.Errorf("the refused update changed the volume: %q", stored())
	}
}

// A backup to a target made with kubectl at another target's place is
// refused naming the target that holds it: it would land among that
// target's backups.
func TestBackupToATargetAtAnothersPlaceIsRefused(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}}
	offsite := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "offsite", Namespace: testNamespace, CreationTimestamp: metav1.NewTime(t0)},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///mnt/offsite"}}
	second := &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: testNamespace, CreationTimestamp: metav1.NewTime(t0.Add(time.Hour))},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file://localhost/mnt/offsite/"}}
	s := newTestServer(t, vol, offsite, second)
	eventually(t, "the targets in the cache", func() bool { _, err := s.server.ds.GetBackupTargetRO("second"); return err == nil })
	code, out, raw := s.do(t, "POST", "/v1/volumes/vol?action=snapshotBackup", `{"name":"s1","backupTargetName":"second"}`)
	if code != http.StatusBadRequest || !strings.Contains(out["message"].(string), "backup target second keeps its backups where backup target offsite does") {
		t.Errorf("a backup to second: %d %s", code, raw)
	}
}
