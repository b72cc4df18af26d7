package api

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// backupVerify's full: a full drill asked for is recorded in the Backup's
// spec; one asked while a drill of the blocks alone is pending is a new
// request, of a later time (the drill of the blocks may be running, and
// its result answers only its own request); a drill of the blocks asked
// while the full one is pending is that one; a full that is not a boolean
// is a 400 naming it.
func TestBackupVerifyFull(t *testing.T) {
	s := newTestServer(t,
		&longhorn.BackupVolume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}},
		&longhorn.Backup{ObjectMeta: metav1.ObjectMeta{Name: "b1", Namespace: testNamespace, Labels: map[string]string{types.LabelBackupVolume: "vol"}},
			Status: longhorn.BackupStatus{State: longhorn.BackupStateCompleted, VolumeName: "vol", BackupCreatedAt: "2026-11-26T09:00:00Z"}})
	spec := func() longhorn.BackupSpec {
		b, err := s.lh.LonghornV1beta2().Backups(testNamespace).Get(context.Background(), "b1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return b.Spec
	}
	if status, _, raw := s.do(t, "POST", "/v1/backupvolumes/vol?action=backupVerify", `{"full":"yes"}`); status != http.StatusBadRequest || !strings.Contains(raw, "full") {
		t.Fatalf("full not a boolean: %d %s", status, raw)
	}
	status, body, raw := s.do(t, "POST", "/v1/backupvolumes/vol?action=backupVerify", `{}`)
	if status != http.StatusOK || body["verifyFull"] == true || spec().VerifyFull || spec().VerifyRequestedAt.Time.IsZero() {
		t.Fatalf("a drill of the blocks: %d %s", status, raw)
	}
	asked := spec().VerifyRequestedAt
	// The request in the cache, as a second request finds it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := s.server.ds.GetBackupRO("b1"); err == nil && !b.Spec.VerifyRequestedAt.Time.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the drill's request never reached the cache")
		}
	}
	status, body, raw = s.do(t, "POST", "/v1/backupvolumes/vol?action=backupVerify", `{"full":true}`)
	fullAsked := spec().VerifyRequestedAt
	if status != http.StatusOK || body["verifyFull"] != true || !spec().VerifyFull || !fullAsked.After(asked.Time) ||
		body["verifyRequestedAt"] != fullAsked.UTC().Format(time.RFC3339) {
		t.Fatalf("a full drill asked while one of the blocks is pending is a new request, later: %d %s, spec %+v, the blocks' at %v", status, raw, spec(), asked)
	}
	// The drill of the blocks, made for the first request, answers it
	// alone: the full request stays due.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := s.server.ds.GetBackupRO("b1"); err == nil && b.Spec.VerifyFull {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the full request never reached the cache")
		}
	}
	b, err := s.lh.LonghornV1beta2().Backups(testNamespace).Get(context.Background(), "b1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Status.Verification = &longhorn.BackupVerification{RequestedAt: asked, Result: longhorn.BackupVerificationPassed}
	if !datastore.VerifyDue(b) {
		t.Fatal("the drill of the blocks answered the full request")
	}
	status, body, raw = s.do(t, "POST", "/v1/backupvolumes/vol?action=backupVerify", `{}`)
	if status != http.StatusOK || body["verifyFull"] != true || !spec().VerifyRequestedAt.Time.Equal(fullAsked.Time) {
		t.Fatalf("a drill of the blocks asked while a full one is pending is that one: %d %s, spec %+v", status, raw, spec())
	}
}
