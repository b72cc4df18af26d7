//go:build e2e

package ui

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestLonghornUISystemBackupPage walks Longhorn's UI's System Backup
// page against the manager on the real control plane: a system backup
// is created through the page's form and becomes Ready, a restore of it
// is asked for from its row's menu and completes, the system backup is
// deleted from its menu (its archive with it), and the browser logs no
// uncaught error.
func TestLonghornUISystemBackupPage(t *testing.T) {
	e, b := newUIEnv(t)
	ctx := context.Background()
	e.SetBackupTarget(t, "file://"+t.TempDir())
	framework.Eventually(t, 30*time.Second, "the default target available", func() (bool, error) {
		bt, err := e.LH.LonghornV1beta2().BackupTargets(e.NS).Get(ctx, "default", metav1.GetOptions{})
		return err == nil && bt.Status.Available, nil
	})
	b.page("systemBackups", "System Restore")

	b.recordRequests()
	b.button("", "Create")
	b.waitText("the create form", "Create System Backup")
	b.typeText(".ant-modal #name", "ui-sb")
	b.shot("system-backup-create-form")
	b.modalOK()
	oneWrite(t, b, "Create System Backup", "/v1/systembackups")
	framework.Eventually(t, 30*time.Second, "SystemBackup ui-sb Ready", func() (bool, error) {
		sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "ui-sb", metav1.GetOptions{})
		return err == nil && sb.Status.State == longhorn.SystemBackupStateReady && sb.Spec.VolumeBackupPolicy == longhorn.SystemBackupCreateVolumeBackupPolicyIfNotPresent, nil
	})
	b.rowShows("ui-sb", "Ready")
	b.checkConsole("Create System Backup")

	b.recordRequests()
	b.rowMenu("ui-sb", "Restore")
	b.waitText("the restore form", "Restore System Backup")
	b.typeText(".ant-modal #name", "ui-restore")
	b.modalOK()
	oneWrite(t, b, "Restore System Backup", "/v1/systemrestores")
	framework.Eventually(t, 30*time.Second, "SystemRestore ui-restore Completed", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "ui-restore", metav1.GetOptions{})
		return err == nil && sr.Spec.SystemBackup == "ui-sb" && sr.Status.State == longhorn.SystemRestoreStateCompleted, nil
	})
	b.rowShows("ui-restore", "Completed")
	b.checkConsole("Restore System Backup")

	b.recordRequests()
	b.rowMenu("ui-sb", "Delete")
	b.maybeModalOK()
	oneWrite(t, b, "Delete System Backup", "/v1/systembackups/ui-sb")
	framework.Eventually(t, 30*time.Second, "SystemBackup ui-sb gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "ui-sb", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	b.checkConsole("Delete System Backup")
	b.streamsHealthy("the System Backup page")
}

// oneWrite waits for the one write what sends, and checks it succeeded
// at the URL ending in path.
func oneWrite(t *testing.T, b *uiBrowser, what, path string) {
	t.Helper()
	if w := b.waitWrites(what, 1); len(w) != 1 || w[0].Status/100 != 2 || !strings.HasSuffix(w[0].URL, path) {
		t.Fatalf("%s sent %+v", what, w)
	}
}
