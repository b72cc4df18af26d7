//go:build e2e

package systembackup

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestARestoreLeavesExistingObjectsAsTheyAre restores a system backup in
// the cluster it was made in: a recurring job changed since is left as
// it is now, one deleted since comes back, and a volume the archive
// holds no backup of (policy disabled) is not made again.
func TestARestoreLeavesExistingObjectsAsTheyAre(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	e.SetBackupTarget(t, "file://"+t.TempDir())
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"kept","task":"snapshot","cron":"0 1 * * *","retain":2}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"gone","task":"snapshot","cron":"0 2 * * *","retain":2}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes", `{"name":"nobackup","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "the jobs and the volume cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/gone", "").Status == 200 && e.Call(t, "GET", "/v1/volumes/nobackup", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/systembackups", `{"name":"sb","volumeBackupPolicy":"disabled"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "system backup sb Ready", func() (bool, error) {
		sb := systemBackup(t, e, "sb")
		return sb != nil && sb.Status.State == longhorn.SystemBackupStateReady, nil
	})

	e.Call(t, "PUT", "/v1/recurringjobs/kept", `{"name":"kept","task":"snapshot","cron":"0 5 * * *","retain":2}`).Expect(t, 200)
	e.Call(t, "DELETE", "/v1/recurringjobs/gone", "").Expect(t, 204)
	e.Call(t, "DELETE", "/v1/volumes/nobackup", "").Expect(t, 204)
	framework.Eventually(t, 30*time.Second, "the job and the volume deleted", func() (bool, error) {
		_, jerr := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(ctx, "gone", metav1.GetOptions{})
		_, verr := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "nobackup", metav1.GetOptions{})
		return jerr != nil && verr != nil, nil
	})

	e.Call(t, "POST", "/v1/systemrestores", `{"name":"sr","systemBackup":"sb"}`).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "system restore sr Completed", func() (bool, error) {
		sr, err := e.LH.LonghornV1beta2().SystemRestores(e.NS).Get(ctx, "sr", metav1.GetOptions{})
		return err == nil && sr.Status.State == longhorn.SystemRestoreStateCompleted, nil
	})
	framework.Eventually(t, 10*time.Second, "the deleted job back", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/gone", "").Status == 200, nil
	})
	if job := e.Call(t, "GET", "/v1/recurringjobs/kept", "").Expect(t, 200); job.Body["cron"] != "0 5 * * *" {
		t.Errorf("the existing job was changed by the restore: cron %v, want 0 5 * * *", job.Body["cron"])
	}
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "nobackup", metav1.GetOptions{}); err == nil {
		t.Error("a volume the archive holds no backup of was made again (it would be empty)")
	}
}
