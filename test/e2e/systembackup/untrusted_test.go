//go:build e2e

package systembackup

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/systembackup"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// plant writes an archive of the given entries and its record into a
// file:// target, as another cluster (or a hostile hand) would.
func plant(t *testing.T, root, version, name string, entries map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for p, data := range entries {
		f, err := w.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(systembackup.Config{Name: name, LonghornVersion: version, CreatedAt: time.Now().UTC(), Checksum: systembackup.Checksum(buf.Bytes())})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "backupstore/system-backups", version, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, data := range map[string][]byte{"system-backup.zip": buf.Bytes(), "system-backup.cfg": cfg} {
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAHostileArchiveIsRefusedAndNothingOfItIsWritten: an archive found
// in the target with an entry out of its folder is synced as a
// SystemBackup, and its restore fails naming the entry, having made
// none of the objects the archive's good files hold.
func TestAHostileArchiveIsRefusedAndNothingOfItIsWritten(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := t.TempDir()
	jobs := "apiVersion: longhorn.io/v1beta2\nkind: RecurringJobList\nitems:\n- metadata: {name: planted}\n  spec: {task: snapshot, cron: '0 1 * * *', retain: 1}\n"
	plant(t, root, "v1.9.0", "hostile", map[string]string{
		"hostile/metadata.yaml":                     "longhornVersion: v1.9.0\n",
		"hostile/yamls/longhorn/recurringjobs.yaml": jobs,
		"hostile/../../escape.yaml":                 "x",
	})
	e.SetBackupTarget(t, "file://"+root)
	ctx := context.Background()
	framework.Eventually(t, 30*time.Second, "the planted archive's SystemBackup Ready", func() (bool, error) {
		sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "hostile", metav1.GetOptions{})
		return err == nil && sb.Status.State == longhorn.SystemBackupStateReady && sb.Status.Version == "v1.9.0", nil
	})
	if _, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: longhorn.SystemRestoreSpec{SystemBackup: "hostile", Requester: me(t, e.Kube)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the restore in Error naming the entry", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "r", metav1.GetOptions{})
		if err != nil || sr.Status.State != longhorn.SystemRestoreStateError {
			return false, nil
		}
		for _, c := range sr.Status.Conditions {
			if c.Type == longhorn.SystemRestoreConditionTypeError && c.Reason == longhorn.SystemRestoreConditionReasonUnpack &&
				strings.Contains(c.Message, "hostile/../../escape.yaml") {
				return true, nil
			}
		}
		t.Fatalf("restore in Error without the entry named: %+v", sr.Status.Conditions)
		return false, nil
	})
	e.Call(t, "GET", "/v1/recurringjobs/planted", "").Expect(t, 404)
	if _, err := os.Stat(filepath.Join(root, "escape.yaml")); !os.IsNotExist(err) {
		t.Fatalf("a file was written out of the archive's folder: %v", err)
	}

	// A restore of a system backup that does not exist says so.
	if _, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: "none"},
		Spec: longhorn.SystemRestoreSpec{SystemBackup: "missing", Requester: me(t, e.Kube)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the restore of a missing system backup in Error", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "none", metav1.GetOptions{})
		return err == nil && sr.Status.State == longhorn.SystemRestoreStateError &&
			strings.Contains(sr.Status.Conditions[0].Message, `SystemBackup "missing" does not exist`), nil
	})
}

// An archive's settings are restored but for those that guard the
// cluster: one that would open the backing image download guard to every
// address is left as this cluster has it, while an ordinary setting of
// the same archive is restored.
func TestAnArchiveCannotLoosenTheClustersGuards(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	root := t.TempDir()
	settings := "apiVersion: longhorn.io/v1beta2\nkind: SettingList\nitems:\n" +
		"- metadata: {name: backing-image-download-allowed-ranges}\n  value: 0.0.0.0/0\n" +
		"- metadata: {name: recurring-job-max-retention}\n  value: '77'\n"
	plant(t, root, "v1.9.0", "guards", map[string]string{
		"guards/metadata.yaml":               "longhornVersion: v1.9.0\n",
		"guards/yamls/longhorn/setting.yaml": settings,
	})
	before := e.Call(t, "GET", "/v1/settings/backing-image-download-allowed-ranges", "").Expect(t, 200).Body["value"]
	e.SetBackupTarget(t, "file://"+root)
	ctx := context.Background()
	framework.Eventually(t, 30*time.Second, "the planted archive's SystemBackup Ready", func() (bool, error) {
		sb, err := e.LH.LonghornV1beta2().SystemBackups(e.NS).Get(ctx, "guards", metav1.GetOptions{})
		return err == nil && sb.Status.State == longhorn.SystemBackupStateReady, nil
	})
	if _, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Create(ctx, &longhorn.SystemRestore{ObjectMeta: metav1.ObjectMeta{Name: "r"},
		Spec: longhorn.SystemRestoreSpec{SystemBackup: "guards", Requester: me(t, e.Kube)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the restore Completed", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "r", metav1.GetOptions{})
		if err == nil && sr.Status.State == longhorn.SystemRestoreStateError {
			t.Fatalf("the restore failed: %+v", sr.Status.Conditions)
		}
		return err == nil && sr.Status.State == longhorn.SystemRestoreStateCompleted, nil
	})
	framework.Eventually(t, 10*time.Second, "the ordinary setting restored", func() (bool, error) {
		return e.Call(t, "GET", "/v1/settings/recurring-job-max-retention", "").Body["value"] == "77", nil
	})
	if got := e.Call(t, "GET", "/v1/settings/backing-image-download-allowed-ranges", "").Body["value"]; got != before {
		t.Errorf("the archive set the download allowed ranges to %v (was %v)", got, before)
	}
}
