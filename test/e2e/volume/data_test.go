//go:build e2e

package volume

import (
	"context"
	"crypto/sha256"
	"os"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestVolumeAttachWriteSnapshotRevertAndDelete(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"data","size":"16Mi","numberOfReplicas":2}`).Expect(t, 200)
	e.WaitVolume(t, "data", "volume detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	replicas, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(replicas.Items) != 2 {
		t.Fatalf("replicas: %v, %v", replicas, err)
	}
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"early"}`).Expect(t, 400, "must be attached")

	e.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-9"}`).Expect(t, 400, "hostId")
	e.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "data", "attached with an NBD endpoint", func(v map[string]any) bool {
		return v["state"] == "attached" && strings.HasPrefix(v["endpoint"].(string), "nbd://127.0.0.1:") && v["robustness"] == "healthy"
	})
	endpoint := v["endpoint"].(string)
	framework.Eventually(t, 10*time.Second, "replicas running", func() (bool, error) {
		list, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			return false, err
		}
		for _, r := range list.Items {
			if r.Status.CurrentState != "running" {
				return false, nil
			}
		}
		return true, nil
	})
	if _, ok := v["actions"].(map[string]any)["snapshotCreate"]; !ok {
		t.Errorf("an attached volume does not offer snapshotCreate: %v", v["actions"])
	}

	framework.QemuIO(t, endpoint, "write -P 0xab 0 1M", "flush")
	snap := e.Call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"snap1","labels":{"RecurringJob":"manual"}}`).Expect(t, 200)
	if snap.Body["name"] != "snap1" || snap.Body["usercreated"] != true || snap.Body["labels"].(map[string]any)["RecurringJob"] != "manual" {
		t.Errorf("created snapshot %s", snap.Raw)
	}
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"snap1"}`).Expect(t, 400, "already exists")
	framework.QemuIO(t, endpoint, "write -P 0xcd 0 1M", "flush")

	// The Engine object's status mirrors the engine's snapshots.
	framework.Eventually(t, 45*time.Second, "engine.status.snapshots", func() (bool, error) {
		eng, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("data"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := eng.Status.Snapshots["snap1"]
		head := eng.Status.Snapshots["volume-head"]
		return s != nil && head != nil && head.Parent == "snap1" && s.UserCreated && s.Size == "1048576", nil
	})
	list := e.Call(t, "POST", "/v1/volumes/data?action=snapshotList", "").Expect(t, 200)
	if got := strings.Join(framework.Names(list), ","); got != "snap1,volume-head" {
		t.Errorf("snapshot list %s", got)
	}
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotGet", `{"name":"nope"}`).Expect(t, 404)
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotRevert", `{"name":"snap1"}`).Expect(t, 400, "frontend")

	// Revert needs the volume without a frontend.
	e.Call(t, "POST", "/v1/volumes/data?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "data", "detached", func(v map[string]any) bool { return v["state"] == "detached" && v["endpoint"] == "" })
	e.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1","disableFrontend":true}`).Expect(t, 200)
	e.WaitVolume(t, "data", "attached without a frontend", func(v map[string]any) bool {
		return v["state"] == "attached" && v["frontendDisabled"] == true
	})
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotRevert", `{"name":"snap1"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/data?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "data", "detached again", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "data", "attached with a frontend again", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	// The reverted volume reads what snap1 held, byte for byte.
	want := make([]byte, 16<<20)
	for i := 0; i < 1<<20; i++ {
		want[i] = 0xab
	}
	if got := framework.DeviceContent(t, v["endpoint"].(string)); sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatal("the reverted volume's checksum differs from snap1's")
	}

	e.Call(t, "POST", "/v1/volumes/data?action=snapshotDelete", `{"name":"snap1"}`).Expect(t, 200)
	got := e.Call(t, "POST", "/v1/volumes/data?action=snapshotGet", `{"name":"snap1"}`).Expect(t, 200)
	if got.Body["removed"] != true {
		t.Errorf("a deleted snapshot is not marked removed: %s", got.Raw)
	}
	e.Call(t, "POST", "/v1/volumes/data?action=snapshotPurge", "").Expect(t, 200)

	// Deleting the volume stops its engine and removes its data.
	dirs := []string{}
	for _, r := range replicas.Items {
		dirs = append(dirs, r.Spec.DiskPath+"/replicas/"+r.Spec.DataDirectoryName)
	}
	e.Call(t, "DELETE", "/v1/volumes/data", "").Expect(t, 204)
	framework.Eventually(t, 20*time.Second, "volume gone", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "data", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("replica data %s is still there", d)
		}
	}
}
