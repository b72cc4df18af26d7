//go:build e2e

package recurringjob

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestTheManagerRunnerDrillsTheNewestBackup: a backup-verify job fired by
// the manager runner (the same task code as a CronJob pod's) drills the
// newest Completed backup of its volume, which is detached and stays so:
// a drill reads the target alone. The run succeeds and the Backup and the
// volume record the drill.
func TestTheManagerRunnerDrillsTheNewestBackup(t *testing.T) {
	t.Parallel()
	e, _ := framework.NewRunnerEnv(t)
	e.SetBackupTarget(t, "file://"+t.TempDir())
	// Suspended until the volume has its backups.
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"drill","task":"backup-verify","cron":"* * * * *","retain":0,"concurrency":1,"suspend":true}`).Expect(t, 200)
	e.AttachedVolume(t, "db", "drill")
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	var newest string
	for i := 0; i < 2; i++ {
		newest = e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
		framework.Eventually(t, 60*time.Second, "backup "+newest+" Completed", func() (bool, error) {
			b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), newest, metav1.GetOptions{})
			return err == nil && b.Status.State == longhorn.BackupStateCompleted, nil
		})
	}
	e.Call(t, "POST", "/v1/volumes/db?action=detach", `{}`).Expect(t, 200)
	e.WaitVolume(t, "db", "detached", func(m map[string]any) bool { return m["state"] == "detached" })

	e.Call(t, "PUT", "/v1/recurringjobs/drill", `{"suspend":false}`).Expect(t, 200)
	e.WaitJob(t, "drill", "a successful run", 150*time.Second, func(j *longhorn.RecurringJob) bool { return j.Status.LastSuccessfulTime != nil })
	b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), newest, metav1.GetOptions{})
	if err != nil || b.Status.Verification == nil || b.Status.Verification.Result != longhorn.BackupVerificationPassed {
		t.Fatalf("the newest backup's drill: %+v, %v", b.Status.Verification, err)
	}
	v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "db", metav1.GetOptions{})
	if err != nil || v.Status.LastBackupVerification == nil || v.Status.LastBackupVerification.Backup != newest {
		t.Fatalf("the volume's record: %+v, %v", v.Status.LastBackupVerification, err)
	}
	if v.Status.State != longhorn.VolumeStateDetached || v.Spec.NodeID != "" {
		t.Fatalf("the drill attached the volume: %s on %q", v.Status.State, v.Spec.NodeID)
	}
}
