//go:build e2e

package backup

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestDefaultBackupTargetAndTheSettings: on the real control plane, a
// settings change reaches "default" (and its poll its status), an update
// of "default" through the client (as kubectl's) reaches the settings,
// the API lists it as Longhorn's does, and the apiserver's CEL rules
// refuse what they can check, naming the field.
func TestDefaultBackupTargetAndTheSettings(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	targets := e.LH.LonghornV1beta2().BackupTargets(e.NS)
	get := func() *longhorn.BackupTarget {
		t.Helper()
		bt, err := targets.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return bt
	}

	first := "file://" + t.TempDir()
	e.SetBackupTarget(t, first)
	framework.Eventually(t, 20*time.Second, "the setting in default's spec and the poll in its status", func() (bool, error) {
		bt, err := targets.Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return bt.Spec.BackupTargetURL == first && bt.Status.Available && !bt.Status.LastSyncedAt.IsZero() && bt.Status.OwnerID == "node-1", nil
	})

	second := "file://" + t.TempDir()
	bt := get()
	bt.Spec.BackupTargetURL = second
	bt.Spec.PollInterval = metav1.Duration{Duration: 10 * time.Minute}
	if _, err := targets.Update(ctx, bt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	setting := func(name types.SettingName) string {
		s, err := e.LH.LonghornV1beta2().Settings(e.NS).Get(ctx, string(name), metav1.GetOptions{})
		if err != nil {
			return ""
		}
		return s.Value
	}
	framework.Eventually(t, 20*time.Second, "default's spec in the settings", func() (bool, error) {
		return setting(types.SettingNameBackupTarget) == second && setting(types.SettingNameBackupstorePollInterval) == "600", nil
	})
	// Settled: nothing is copied back and forth.
	rv := get().ResourceVersion
	time.Sleep(time.Second)
	if got := get(); got.Spec.BackupTargetURL != second || got.Generation != bt.Generation+1 {
		t.Errorf("default after settling: generation %d (was %d), URL %q, resourceVersion %s (was %s)", got.Generation, bt.Generation, got.Spec.BackupTargetURL, got.ResourceVersion, rv)
	}

	framework.Eventually(t, 10*time.Second, "the API lists default", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/backuptargets", "").Expect(t, 200)
		data, _ := r.Body["data"].([]any)
		if len(data) != 1 {
			return false, nil
		}
		got := data[0].(map[string]any)
		return got["name"] == "default" && got["backupTargetURL"] == second && got["pollInterval"] == "10m0s", nil
	})

	for _, tc := range []struct {
		mutate func(*longhorn.BackupTarget)
		says   string
	}{
		{func(bt *longhorn.BackupTarget) { bt.Spec.BackupTargetURL = "ftp://host/" }, "backupTargetURL must be empty or start with s3://"},
		{func(bt *longhorn.BackupTarget) { bt.Spec.PollInterval = metav1.Duration{Duration: -time.Second} }, "pollInterval must not be negative"},
	} {
		bt := get()
		tc.mutate(bt)
		_, err := targets.Update(ctx, bt, metav1.UpdateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("update: %v, want a refusal saying %q", err, tc.says)
		}
	}
}

// TestUpgradeFromSettingsAloneMakesDefault: a cluster of backup settings
// and no BackupTarget gets "default" from them at the daemon's start.
func TestUpgradeFromSettingsAloneMakesDefault(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()
	target := "file://" + t.TempDir()
	for name, value := range map[types.SettingName]string{
		types.SettingNameBackupTarget:            target,
		types.SettingNameBackupstorePollInterval: "120",
	} {
		if _, err := lh.LonghornV1beta2().Settings(ns).Create(ctx, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(name)}, Value: value}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	framework.InstallRBAC(t, kube, ns)
	framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir())
	bt, err := lh.LonghornV1beta2().BackupTargets(ns).Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("default after the start: %v", err)
	}
	if want := (longhorn.BackupTargetSpec{BackupTargetURL: target, PollInterval: metav1.Duration{Duration: 2 * time.Minute}}); bt.Spec != want {
		t.Errorf("default's spec %+v, want %+v", bt.Spec, want)
	}
}
