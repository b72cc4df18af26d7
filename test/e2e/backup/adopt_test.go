//go:build e2e

package backup

import (
	"context"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestABackupRunsOnThroughAManagerRestart: with the engines in an
// instance manager, a backup in progress when the manager stops runs on
// in its engine; the manager that comes back follows it (InProgress, never
// marked interrupted) to its end, Completed once the target lets it go on.
func TestABackupRunsOnThroughAManagerRestart(t *testing.T) {
	t.Parallel()
	h := startHeldBackup(t, framework.InstanceManagerProcess(t))
	h.restart(t)
	get := func() (string, string) {
		b, err := h.e.LH.LonghornV1beta2().Backups(h.ns).Get(context.Background(), h.backup, metav1.GetOptions{})
		if err != nil {
			return "", err.Error()
		}
		return string(b.Status.State), b.Status.Error
	}
	// A while after the restart it is still the engine's, in progress.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if state, msg := get(); state != "InProgress" {
			t.Fatalf("the Backup after the manager's restart: %s %s; want InProgress, followed in its engine", state, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := os.Remove(h.lock); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the Backup Completed", func() (bool, error) {
		state, _ := get()
		return state == "Completed", nil
	})
	url := h.e.CompletedBackupURL(t, h.backup)
	h.e.Call(t, "POST", "/v1/volumes", `{"name":"back","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	h.e.WaitVolumeFor(t, 60*time.Second, "back", "restored", func(v map[string]any) bool { return v["restoreRequired"] == false && v["ready"] == true })
}
