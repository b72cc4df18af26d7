//go:build e2e

package api

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestHostileEngineClientCannotRestoreOverOrBackUpOutOfAVolume plays a
// caller of the engine service of an attached volume that holds a
// certificate of the cluster's CA (a Longhorn component, or one whose
// certificate was stolen; any other pod is refused at the handshake, see
// TestInternalCallsNeedACertificateOfTheClustersCA): a Restore over the
// live volume is refused and leaves its data; a backup to a target of
// its own is refused; only the configured target serves.
// Oversized snapshot labels are refused with the rule.
func TestHostileEngineClientCannotRestoreOverOrBackUpOutOfAVolume(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	target := "file://" + t.TempDir()
	e.SetBackupTarget(t, target)
	e.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	endpoint := e.AttachVolume(t, "src")
	framework.QemuIO(t, endpoint, "write -P 0x5a 0 1M", "flush")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1","labels":{"k":"`+strings.Repeat("v", 2000)+`"}}`).
		Expect(t, 400, "labels", "at most 1024 bytes")
	e.Call(t, "POST", "/v1/volumes/src?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	backup := e.Call(t, "POST", "/v1/volumes/src?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	var url string
	framework.Eventually(t, 30*time.Second, "the backup completed", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/backupvolumes/src?action=backupGet", `{"name":"`+backup+`"}`)
		if r.Status == 200 && r.Body["state"] == "Completed" {
			url = r.Body["url"].(string)
		}
		return url != "", nil
	})
	framework.QemuIO(t, endpoint, "write -P 0x77 0 1M", "flush")

	eng, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("src"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := engineapi.NewGRPCClient(net.JoinHostPort(eng.Status.IP, strconv.Itoa(eng.Status.Port)), "src", 10*time.Second, framework.ClusterIdentity(t, e.Kube, e.NS))
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close()
	ctx := context.Background()
	err = hostile.BackupRestore(ctx, url, nil)
	if err == nil || !strings.Contains(err.Error(), "not being restored") {
		t.Fatalf("restore over the attached volume: %v", err)
	}
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got[:1<<20], bytes.Repeat([]byte{0x77}, 1<<20)) {
		t.Fatal("the refused restore changed the live volume")
	}
	elsewhere := "file://" + t.TempDir()
	_, err = hostile.SnapshotBackup(ctx, engineapi.BackupRequest{Snapshot: "s1", Target: elsewhere})
	if err == nil || !strings.Contains(err.Error(), "only a configured backup target") {
		t.Fatalf("backup to the hostile pod's target: %v", err)
	}
	err = hostile.BackupRestore(ctx, elsewhere+"?backup=b&volume=src", nil)
	if err == nil || !strings.Contains(err.Error(), "only a configured backup target") {
		t.Fatalf("restore from the hostile pod's target: %v", err)
	}
}
