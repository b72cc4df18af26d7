//go:build e2e

package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestLonghornUIBackupTargetPage walks Longhorn's UI's Backup Target page
// against the manager on the real control plane: the targets are listed,
// one is created, edited and deleted through the page's own forms and
// menus (each reaching the BackupTarget object), a target with a URL the
// manager refuses is not made and the UI shows why, the default target
// cannot be deleted from its menu, and the browser logs no uncaught
// error.
func TestLonghornUIBackupTargetPage(t *testing.T) {
	e, b := newUIEnv(t)
	targets := e.LH.LonghornV1beta2().BackupTargets(e.NS)
	ctx := context.Background()

	framework.Eventually(t, 30*time.Second, "the default BackupTarget", func() (bool, error) {
		_, err := targets.Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	b.page("backupTarget", "default")
	b.shot("backup-target-page")

	// Create: the page's form makes the object.
	b.recordRequests()
	b.button("", "Create Backup Target")
	b.waitText("the create form", "Create Backup Target")
	b.typeText(".ant-modal #name", "offsite")
	b.typeText(".ant-modal #backupTargetURL", "s3://offsite@us-west-2/")
	b.typeText(".ant-modal #credentialSecret", "longhorn-backup-credential")
	b.typeText(".ant-modal #pollInterval", "600")
	b.shot("backup-target-create-form")
	b.modalOK()
	if w := b.waitWrites("Create Backup Target", 1); len(w) != 1 || w[0].Status != 200 || !strings.HasSuffix(w[0].URL, "/v1/backuptargets") {
		t.Fatalf("Create Backup Target sent %+v", w)
	}
	framework.Eventually(t, 10*time.Second, "BackupTarget offsite as the form said", func() (bool, error) {
		bt, err := targets.Get(ctx, "offsite", metav1.GetOptions{})
		return err == nil && bt.Spec.BackupTargetURL == "s3://offsite@us-west-2/" && bt.Spec.CredentialSecret == "longhorn-backup-credential" &&
			bt.Spec.PollInterval.Duration == 10*time.Minute, nil
	})
	b.rowShows("offsite", "s3://offsite@us-west-2/", "longhorn-backup-credential")
	b.checkConsole("Create Backup Target")

	// Edit: the page's form changes the URL through backupTargetUpdate.
	b.recordRequests()
	b.rowMenu("offsite", "Edit")
	b.waitText("the edit form", "Edit Backup Target offsite")
	b.typeText(".ant-modal #backupTargetURL", "s3://offsite@eu-west-1/")
	b.modalOK()
	if w := b.waitWrites("Edit Backup Target", 1); len(w) != 1 || w[0].Status != 200 || !strings.Contains(w[0].URL, "/v1/backuptargets/offsite?action=backupTargetUpdate") {
		t.Fatalf("Edit Backup Target sent %+v", w)
	}
	framework.Eventually(t, 10*time.Second, "BackupTarget offsite with the new URL", func() (bool, error) {
		bt, err := targets.Get(ctx, "offsite", metav1.GetOptions{})
		return err == nil && bt.Spec.BackupTargetURL == "s3://offsite@eu-west-1/" && bt.Spec.CredentialSecret == "longhorn-backup-credential", nil
	})
	b.rowShows("offsite", "s3://offsite@eu-west-1/")
	b.checkConsole("Edit Backup Target")

	// A URL the manager cannot use: refused, naming the field, nothing made.
	// The edit's success message goes first, so that none is mistaken
	// for this one's.
	b.until("the edit's message gone", `document.querySelectorAll(".ant-message-notice").length === 0`, 30*time.Second)
	b.recordRequests()
	b.button("", "Create Backup Target")
	b.waitText("the create form", "Create Backup Target")
	b.typeText(".ant-modal #name", "bad")
	b.typeText(".ant-modal #backupTargetURL", "ftp://example.com/backups")
	b.clickJS("the dialog's OK", `[...document.querySelectorAll(".ant-modal button")].filter(e => e.innerText.trim().toLowerCase() === "ok" && e.offsetParent !== null).pop()`)
	w := b.waitWrites("Create with a bad URL", 1)
	if len(w) != 1 || w[0].Status/100 != 4 || !strings.Contains(w[0].Response, "backupTargetURL") {
		t.Errorf("Create with a bad URL sent %+v, want one refusal naming backupTargetURL", w)
	}
	b.until("the UI shows the manager's reason", `[...document.querySelectorAll(".ant-message")].some(e => e.innerText.includes("backupTargetURL"))`, 15*time.Second)
	b.noSuccessMessage("Create with a bad URL")
	if _, err := targets.Get(ctx, "bad", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("BackupTarget bad: want none, got %v", err)
	}
	// The UI closes its form once it sent it; one still open is cancelled.
	if err := b.eval(`(() => { const c = [...document.querySelectorAll(".ant-modal button")].filter(e => e.innerText.trim().toLowerCase() === "cancel" && e.offsetParent !== null).pop(); if (c) c.click(); return true })()`, new(bool)); err != nil {
		t.Fatal(err)
	}
	b.noDialog("the create form")
	b.checkConsoleExcept("Create with a bad URL", "status of 400")

	// Delete: the page's menu deletes the object; default stays.
	b.recordRequests()
	b.rowMenu("offsite", "Delete")
	b.maybeModalOK()
	if w := b.waitWrites("Delete Backup Target", 1); len(w) != 1 || w[0].Status/100 != 2 || !strings.HasSuffix(w[0].URL, "/v1/backuptargets/offsite") {
		t.Fatalf("Delete Backup Target sent %+v", w)
	}
	framework.Eventually(t, 10*time.Second, "BackupTarget offsite gone", func() (bool, error) {
		_, err := targets.Get(ctx, "offsite", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	b.until("the row of offsite gone", `![...document.querySelectorAll("tr")].some(r => r.innerText.includes("offsite"))`, 30*time.Second)
	b.checkConsole("Delete Backup Target")

	// The default target's delete: the UI greys it (the manager refuses
	// it too, TestBackupTargetWrites), and default stays.
	items := b.openRowMenu("default")
	if greyed, shown := items["Delete"]; shown && !greyed {
		t.Errorf("the default target's menu offers Delete: %v", items)
	}
	b.closeMenus()
	if _, err := targets.Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Errorf("the default BackupTarget: %v", err)
	}
	b.streamsHealthy("the Backup Target page")
}
