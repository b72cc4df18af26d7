//go:build e2e

package backup

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestARestoreRunsBesideItsVolumesSyncs: a restore does not hold its
// volume's sync for its length. While the backup target stalls (the S3
// server paused), a volume being restored says so in its status and its
// Engine's restoreStatus, and a volume deleted in the middle of its
// restore goes at once; when the target answers again the restore
// finishes and the volume reads what was backed up.
func TestARestoreRunsBesideItsVolumesSyncs(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"8Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "src", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x3c 0 3M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	e.PutSecret(t, "s3-secret", srv.Credential())
	e.Call(t, "PUT", "/v1/settings/backup-target-credential-secret", `{"value":"s3-secret"}`).Expect(t, 200)
	e.Call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+srv.Target("")+`"}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "settings in the cache", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target", "").Raw, srv.Target("")) &&
			strings.Contains(e.Call(t, "GET", "/v1/settings/backup-target-credential-secret", "").Raw, "s3-secret"), nil
	})
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	url := e.CompletedBackupURL(t, backup)

	srv.Pause(t)
	paused := true
	defer func() {
		if paused {
			srv.Resume(t)
		}
	}()
	for _, name := range []string{"copy", "doomed"} {
		e.Call(t, "POST", "/v1/volumes", `{"name":"`+name+`","size":"8Mi","numberOfReplicas":1,"fromBackup":"`+url+`"}`).Expect(t, 200)
	}
	var seen string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: %s", seen)
		}
	}()
	restoring := func(name string) (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		engine, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName(name), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		seen = fmt.Sprintf("volume %s: restoreRequired %v initiated %v conditions %+v; engine restoreStatus %s", name,
			vol.Status.RestoreRequired, vol.Status.RestoreInitiated, vol.Status.Conditions, spew(engine.Status.RestoreStatus))
		inProgress := len(engine.Status.RestoreStatus) == 1
		for _, st := range engine.Status.RestoreStatus {
			inProgress = inProgress && st.IsRestoring && st.BackupURL == url
		}
		for _, c := range vol.Status.Conditions {
			if c.Type == "Restore" && c.Status == longhorn.ConditionStatusFalse && c.Reason == "Restoring" {
				return vol.Status.RestoreRequired && vol.Status.RestoreInitiated && inProgress, nil
			}
		}
		return false, nil
	}
	// The target answers nothing for 30 s (the S3 call's bound): each
	// check below would fail if a sync waited on it.
	for _, name := range []string{"copy", "doomed"} {
		framework.Eventually(t, 15*time.Second, name+" says it is restoring while the target stalls", func() (bool, error) { return restoring(name) })
	}
	e.Call(t, "DELETE", "/v1/volumes/doomed", "").Expect(t, 204)
	framework.Eventually(t, 15*time.Second, "the volume deleted in the middle of its restore gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})

	srv.Resume(t)
	paused = false
	framework.Eventually(t, 90*time.Second, "the restore finished once the target answers", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, nil
	})
	engine, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("copy"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for replica, st := range engine.Status.RestoreStatus {
		if st.IsRestoring || st.Progress != 100 || st.LastRestored != backup || st.State != "complete" {
			t.Errorf("replica %s's restore status after the restore: %+v", replica, st)
		}
	}
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolume(t, "copy", "restored volume attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	want := make([]byte, 8<<20)
	copy(want, bytes.Repeat([]byte{0x3c}, 3<<20))
	if got := framework.DeviceContent(t, c["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the restored volume differs from the snapshot")
	}
}

func spew(m map[string]*longhorn.RestoreStatus) string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%+v", k, *v))
	}
	return strings.Join(out, ", ")
}
