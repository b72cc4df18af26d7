//go:build e2e

package recurringjob

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestDrillJobPerTarget: a backup-verify job drills the volume's newest
// Completed backup in each target that holds backups of it (default and
// offsite here), each recorded on its own Backup; an older backup is not
// drilled. A drill job naming a target (spec.backupTargetName) drills
// that target's alone.
func TestDrillJobPerTarget(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	e.SetBackupTarget(t, "file://"+t.TempDir())
	e.Call(t, "POST", "/v1/backuptargets", `{"name":"offsite","backupTargetURL":"file://`+t.TempDir()+`","pollInterval":"300"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "offsite cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/backuptargets/offsite", "").Status == 200, nil
	})
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"drill","task":"backup-verify","cron":"@weekly","retain":0}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"drill-off","task":"backup-verify","cron":"@weekly","retain":0,"backupTargetName":"offsite"}`).
		Expect(t, 200, `"backupTargetName":"offsite"`)
	e.Call(t, "POST", "/v1/volumes", `{"name":"db","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"drill"},{"name":"drill-off"}]}`).Expect(t, 200)
	e.WaitVolume(t, "db", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	endpoint := e.AttachVolume(t, "db")
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 2M", "flush")
	e.Call(t, "POST", "/v1/volumes/db?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	backup := func(target string) string {
		name := e.Call(t, "POST", "/v1/volumes/db?action=snapshotBackup", `{"name":"s1","backupTargetName":"`+target+`"}`).Expect(t, 200).Body["name"].(string)
		e.CompletedBackupURL(t, name)
		return name
	}
	older, newest, away := backup("default"), backup("default"), backup("offsite")

	verification := func(name string) *longhorn.BackupVerification {
		b, err := e.LH.LonghornV1beta2().Backups(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Status.BackupTargetName == "" && name == away {
			t.Fatalf("backup %s names no target", name)
		}
		return b.Status.Verification
	}
	if out := e.RunJob(t, kubeconfig, "drill-off", "2026-11-22T04:00:00Z"); !strings.Contains(out, "succeeded=1 failed=0") {
		t.Fatalf("run of drill-off: %s", out)
	}
	offsiteFirst := verification(away)
	if offsiteFirst == nil || offsiteFirst.Result != longhorn.BackupVerificationPassed {
		t.Fatalf("drill-off left offsite's backup %s undrilled: %+v", away, offsiteFirst)
	}
	if v := verification(newest); v != nil {
		t.Fatalf("drill-off, naming offsite, drilled default's backup %s: %+v", newest, v)
	}

	if out := e.RunJob(t, kubeconfig, "drill", "2026-11-23T04:00:00Z"); !strings.Contains(out, "succeeded=1 failed=0") {
		t.Fatalf("run of drill: %s", out)
	}
	if v := verification(newest); v == nil || v.Result != longhorn.BackupVerificationPassed {
		t.Fatalf("drill left default's newest backup %s undrilled: %+v", newest, v)
	}
	if v := verification(away); v == nil || v.Result != longhorn.BackupVerificationPassed || !v.RequestedAt.After(offsiteFirst.RequestedAt.Time) {
		t.Fatalf("drill did not drill offsite's backup %s again: %+v (first %+v)", away, v, offsiteFirst)
	}
	if v := verification(older); v != nil {
		t.Fatalf("an older backup %s was drilled: %+v", older, v)
	}
}
