//go:build e2e

package backup

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestFileTargetsOutsideTheRootsAreRefused: the daemon's file:// targets
// lie in its --backup-target-file-roots (the tests' temporary folder).
// The API refuses one elsewhere with a 400 naming the field, before it
// writes anything; a BackupTarget made with kubectl there is Unavailable,
// saying why, and nothing is written where it points.
func TestFileTargetsOutsideTheRootsAreRefused(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	inside := t.TempDir()
	link := filepath.Join(inside, "to-etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ url, says string }{
		{"file:///etc/longhorn-backups", "is outside the folders file:// targets may use"},
		{"file://" + inside + strings.Repeat("/..", 20) + "/etc/longhorn-backups", "is outside the folders"},
		{"file://" + link + "/longhorn-backups", "which resolves to /etc/longhorn-backups"},
		{"file:///proc/1/root" + inside, "/proc is on a proc file system"},
		{"file:///dev/null/backups", "is outside the folders"},
	} {
		e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+tc.url+`"}`).Expect(t, 400, "value: ", tc.says)
		e.Call(t, "POST", "/v1/backuptargets", `{"name":"elsewhere","backupTargetURL":"`+tc.url+`","pollInterval":"300"}`).Expect(t, 400, "backupTargetURL: ", tc.says)
	}
	if r := e.Call(t, "GET", "/v1/settings/backup-target", "").Expect(t, 200); r.Body["value"] != "" {
		t.Errorf("the refused setting was written: %s", r.Raw)
	}
	targets := e.LH.LonghornV1beta2().BackupTargets(e.NS)
	if _, err := targets.Get(ctx, "elsewhere", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused BackupTarget: %v, want it not made", err)
	}
	// Inside the roots, a target is taken.
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"inside","backupTargetURL":"file://`+inside+`/backups","pollInterval":"300"}`).Expect(t, 200)

	// kubectl goes around the API: the controller, which opens the
	// target, refuses it.
	outside := "file:///etc/longhorn-e2e-" + strings.ToLower(e.NS)
	if _, err := targets.Create(ctx, &longhorn.BackupTarget{ObjectMeta: metav1.ObjectMeta{Name: "by-kubectl"},
		Spec: longhorn.BackupTargetSpec{BackupTargetURL: outside, PollInterval: metav1.Duration{Duration: 5 * time.Minute}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the kubectl-made target outside the roots Unavailable, saying why", func() (bool, error) {
		bt, err := targets.Get(ctx, "by-kubectl", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		c := kit.GetCondition(bt.Status.Conditions, longhorn.BackupTargetConditionTypeUnavailable)
		return !bt.Status.Available && c.Status == longhorn.ConditionStatusTrue && strings.Contains(c.Message, "is outside the folders file:// targets may use"), nil
	})
	if _, err := os.Stat(strings.TrimPrefix(outside, "file://")); !os.IsNotExist(err) {
		t.Errorf("the folder outside the roots: %v, want nothing made there", err)
	}
}
