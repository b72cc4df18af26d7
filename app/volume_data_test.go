package app

import (
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
)

func qemuIO(t *testing.T, endpoint string, cmds ...string) string {
	t.Helper()
	path, err := exec.LookPath("qemu-io")
	if err != nil {
		t.Fatal("qemu-io is not installed: run `make test` (scripts/test.sh installs qemu-utils)")
	}
	args := []string{"-f", "raw", endpoint}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := exec.Command(path, args...).CombinedOutput()
	if err != nil || strings.Contains(string(out), "failed") {
		t.Fatalf("qemu-io %v: %v\n%s", cmds, err, out)
	}
	return string(out)
}

// deviceContent copies a whole volume out through its NBD endpoint with
// nbdcopy and returns the bytes.
func deviceContent(t *testing.T, endpoint string) []byte {
	t.Helper()
	path, err := exec.LookPath("nbdcopy")
	if err != nil {
		t.Fatal("nbdcopy is not installed: run `make test` (scripts/test.sh installs libnbd-bin)")
	}
	out := t.TempDir() + "/device.img"
	if msg, err := exec.Command(path, endpoint, out).CombinedOutput(); err != nil {
		t.Fatalf("nbdcopy %s: %v\n%s", endpoint, err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (e *apiEnv) waitVolume(t *testing.T, name, what string, cond func(v map[string]any) bool) map[string]any {
	t.Helper()
	var body map[string]any
	eventually(t, 20*time.Second, what, func() (bool, error) {
		r := e.call(t, "GET", "/v1/volumes/"+name, "")
		body = r.body
		return r.status == 200 && cond(body), nil
	})
	return body
}

func TestVolumeAttachWriteSnapshotRevertAndDelete(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"data","size":"16Mi","numberOfReplicas":2}`).expect(t, 200)
	e.waitVolume(t, "data", "volume detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	replicas, err := e.lh.LonghornV1beta2().Replicas(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(replicas.Items) != 2 {
		t.Fatalf("replicas: %v, %v", replicas, err)
	}
	e.call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"early"}`).expect(t, 400, "must be attached")

	e.call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-9"}`).expect(t, 400, "hostId")
	e.call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolume(t, "data", "attached with an NBD endpoint", func(v map[string]any) bool {
		return v["state"] == "attached" && strings.HasPrefix(v["endpoint"].(string), "nbd://127.0.0.1:") && v["robustness"] == "healthy"
	})
	endpoint := v["endpoint"].(string)
	eventually(t, 10*time.Second, "replicas running", func() (bool, error) {
		list, err := e.lh.LonghornV1beta2().Replicas(e.ns).List(context.Background(), metav1.ListOptions{})
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

	qemuIO(t, endpoint, "write -P 0xab 0 1M", "flush")
	snap := e.call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"snap1","labels":{"RecurringJob":"manual"}}`).expect(t, 200)
	if snap.body["name"] != "snap1" || snap.body["usercreated"] != true || snap.body["labels"].(map[string]any)["RecurringJob"] != "manual" {
		t.Errorf("created snapshot %s", snap.raw)
	}
	e.call(t, "POST", "/v1/volumes/data?action=snapshotCreate", `{"name":"snap1"}`).expect(t, 400, "already exists")
	qemuIO(t, endpoint, "write -P 0xcd 0 1M", "flush")

	// The Engine object's status mirrors the engine's snapshots.
	eventually(t, 45*time.Second, "engine.status.snapshots", func() (bool, error) {
		eng, err := e.lh.LonghornV1beta2().Engines(e.ns).Get(context.Background(), datastore.EngineName("data"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s := eng.Status.Snapshots["snap1"]
		head := eng.Status.Snapshots["volume-head"]
		return s != nil && head != nil && head.Parent == "snap1" && s.UserCreated && s.Size == "1048576", nil
	})
	list := e.call(t, "POST", "/v1/volumes/data?action=snapshotList", "").expect(t, 200)
	if got := strings.Join(names(list), ","); got != "snap1,volume-head" {
		t.Errorf("snapshot list %s", got)
	}
	e.call(t, "POST", "/v1/volumes/data?action=snapshotGet", `{"name":"nope"}`).expect(t, 404)
	e.call(t, "POST", "/v1/volumes/data?action=snapshotRevert", `{"name":"snap1"}`).expect(t, 400, "frontend")

	// Revert needs the volume without a frontend.
	e.call(t, "POST", "/v1/volumes/data?action=detach", "").expect(t, 200)
	e.waitVolume(t, "data", "detached", func(v map[string]any) bool { return v["state"] == "detached" && v["endpoint"] == "" })
	e.call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1","disableFrontend":true}`).expect(t, 200)
	e.waitVolume(t, "data", "attached without a frontend", func(v map[string]any) bool {
		return v["state"] == "attached" && v["frontendDisabled"] == true
	})
	e.call(t, "POST", "/v1/volumes/data?action=snapshotRevert", `{"name":"snap1"}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/data?action=detach", "").expect(t, 200)
	e.waitVolume(t, "data", "detached again", func(v map[string]any) bool { return v["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/data?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v = e.waitVolume(t, "data", "attached with a frontend again", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	// The reverted volume reads what snap1 held, byte for byte.
	want := make([]byte, 16<<20)
	for i := 0; i < 1<<20; i++ {
		want[i] = 0xab
	}
	if got := deviceContent(t, v["endpoint"].(string)); sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatal("the reverted volume's checksum differs from snap1's")
	}

	e.call(t, "POST", "/v1/volumes/data?action=snapshotDelete", `{"name":"snap1"}`).expect(t, 200)
	got := e.call(t, "POST", "/v1/volumes/data?action=snapshotGet", `{"name":"snap1"}`).expect(t, 200)
	if got.body["removed"] != true {
		t.Errorf("a deleted snapshot is not marked removed: %s", got.raw)
	}
	e.call(t, "POST", "/v1/volumes/data?action=snapshotPurge", "").expect(t, 200)

	// Deleting the volume stops its engine and removes its data.
	dirs := []string{}
	for _, r := range replicas.Items {
		dirs = append(dirs, r.Spec.DiskPath+"/replicas/"+r.Spec.DataDirectoryName)
	}
	e.call(t, "DELETE", "/v1/volumes/data", "").expect(t, 204)
	eventually(t, 20*time.Second, "volume gone", func() (bool, error) {
		_, err := e.lh.LonghornV1beta2().Volumes(e.ns).Get(context.Background(), "data", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("replica data %s is still there", d)
		}
	}
}
