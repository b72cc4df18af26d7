//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestAJobWhoseTargetIsDeletedSaysWhy: a backup job naming a BackupTarget
// has BackupTargetFound True; once the target is deleted, the condition
// goes False naming it and a Warning event BackupTargetNotFound on the job
// says so, while the job stays Ready and its spec keeps the target. Made
// again, the target makes the condition True again.
func TestAJobWhoseTargetIsDeletedSaysWhy(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file://`+t.TempDir()+`","pollInterval":"300"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "offsite cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"nightly","task":"backup","cron":"@daily","retain":2,"backupTargetName":"offsite"}`).Expect(t, 200)

	var job *longhorn.RecurringJob
	waitFound := func(what string, status longhorn.ConditionStatus, fragments ...string) {
		t.Helper()
		framework.Eventually(t, 30*time.Second, what, func() (bool, error) {
			j, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).Get(context.Background(), "nightly", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			job = j
			c := kit.GetCondition(j.Status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound)
			if c.Status != status {
				return false, nil
			}
			for _, f := range fragments {
				if !strings.Contains(c.Message, f) {
					return false, nil
				}
			}
			return true, nil
		})
	}
	waitFound("nightly's target found", longhorn.ConditionStatusTrue)

	e.Call(t, "DELETE", "/v1/backuptargets/offsite", "").Expect(t, 204)
	waitFound("nightly's condition naming its deleted target", longhorn.ConditionStatusFalse, `BackupTarget "offsite" does not exist`, "spec.backupTargetName")
	if c := kit.GetCondition(job.Status.Conditions, longhorn.RecurringJobConditionTypeBackupTargetFound); c.Reason != longhorn.RecurringJobConditionReasonBackupTargetNotFound {
		t.Errorf("reason %q", c.Reason)
	}
	if job.Spec.BackupTargetName != "offsite" {
		t.Errorf("the job's spec was changed: backupTargetName %q", job.Spec.BackupTargetName)
	}
	if c := kit.GetCondition(job.Status.Conditions, longhorn.ConditionTypeReady); c.Status != longhorn.ConditionStatusTrue {
		t.Errorf("the job is no longer scheduled: Ready %+v", c)
	}
	e.WaitEvent(t, "RecurringJob", "nightly", longhorn.RecurringJobConditionReasonBackupTargetNotFound, `"offsite"`, "spec.backupTargetName")

	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file://`+t.TempDir()+`","pollInterval":"300"}`).Expect(t, 200)
	waitFound("nightly's target found again", longhorn.ConditionStatusTrue)
}
