//go:build e2e

package volume

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/testfs"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// mountTmpfs mounts a tmpfs of size on dir (created), so that a replica
// there runs out of room. It needs root, as CI has; without it the test is
// skipped.
func mountTmpfs(t *testing.T, dir, size string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	// Lazily: the daemon, stopped after this, may still hold its files.
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
}

// A replica that fails (its disk fills up) while the volume is written is
// marked failed, in spec.failedAt and its Failed condition, and stays out
// of the engine after the volume is detached and attached again, even
// with room again on its disk: the volume reads what it acknowledged.
// Before, both replicas came back RW at the next attach, and the failed
// one, first by name, served its old data. When every replica failed, the
// volume does not attach and says which replicas failed and why; clearing
// spec.failedAt salvages it from the replica whose data is the latest.
func TestAFailedReplicaStaysOutOfTheVolume(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	ctx := context.Background()
	replicas := e.LH.LonghornV1beta2().Replicas(e.NS)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":2}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	var r0 *longhorn.Replica
	framework.Eventually(t, 20*time.Second, "replica vol-r-0", func() (bool, error) {
		var err error
		r0, err = replicas.Get(ctx, "vol-r-0", metav1.GetOptions{})
		return err == nil, nil
	})
	// vol-r-0, first by name (reads go to it), on a disk of 1 MiB.
	dir0 := filepath.Join(r0.Spec.DiskPath, "replicas", r0.Spec.DataDirectoryName)
	mountTmpfs(t, dir0, "1m")

	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x11 0 256k", "flush")
	// vol-r-0's disk fills up: only vol-r-1 takes the write, acknowledged.
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0x22 0 2M", "flush")
	engines := e.LH.LonghornV1beta2().Engines(e.NS)
	framework.Eventually(t, 20*time.Second, "modes vol-r-0:ERR vol-r-1:RW", func() (bool, error) {
		eng, err := engines.Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
		return err == nil && eng.Status.ReplicaModeMap["vol-r-0"] == longhorn.ReplicaModeERR && eng.Status.ReplicaModeMap["vol-r-1"] == longhorn.ReplicaModeRW, err
	})
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })

	// Room again on vol-r-0's disk: it could be opened, but missed writes.
	testfs.Resize(t, dir0, "64m")
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "vol", "attached again", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	want := make([]byte, 4<<20)
	copy(want, bytes.Repeat([]byte{0x22}, 2<<20))
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		eng, _ := engines.Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
		t.Fatalf("the volume does not read the writes it acknowledged (engine modes %v)", eng.Status.ReplicaModeMap)
	}
	eng, err := engines.Get(ctx, datastore.EngineName("vol"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := eng.Status.ReplicaModeMap; m["vol-r-0"] != longhorn.ReplicaModeERR || m["vol-r-1"] != longhorn.ReplicaModeRW {
		t.Errorf("engine modes after the restart %v, want vol-r-0:ERR vol-r-1:RW", m)
	}
	if v["robustness"] != "degraded" {
		t.Errorf("robustness %v, want degraded", v["robustness"])
	}

	// vol-r-0 is marked failed, when and why.
	r0, err = replicas.Get(ctx, "vol-r-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := time.Parse(time.RFC3339, r0.Spec.FailedAt); err != nil {
		t.Errorf("vol-r-0 spec.failedAt %q: %v", r0.Spec.FailedAt, err)
	}
	framework.Eventually(t, 20*time.Second, "vol-r-0 in error with its Failed condition", func() (bool, error) {
		r0, err = replicas.Get(ctx, "vol-r-0", metav1.GetOptions{})
		c := volumeCondition(&longhorn.Volume{Status: longhorn.VolumeStatus{Conditions: r0.Status.Conditions}}, "Failed")
		return err == nil && r0.Status.CurrentState == longhorn.InstanceStateError && c != nil, err
	})
	c := volumeCondition(&longhorn.Volume{Status: longhorn.VolumeStatus{Conditions: r0.Status.Conditions}}, "Failed")
	if c.Status != longhorn.ConditionStatusTrue || c.Reason != "ReplicaIOError" || !strings.Contains(c.Message, "no space left on device") {
		t.Errorf("vol-r-0 Failed condition %+v", c)
	}
	got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := volumeCondition(got, "ReplicaFailed"); c == nil || c.Status != longhorn.ConditionStatusTrue || !strings.Contains(c.Message, "replica vol-r-0 failed at "+r0.Spec.FailedAt) {
		t.Errorf("the volume's ReplicaFailed condition %+v", c)
	}
	api := e.Call(t, "GET", "/v1/volumes/vol", "").Expect(t, 200)
	for _, r := range api.Body["replicas"].([]any) {
		r := r.(map[string]any)
		if r["name"] == "vol-r-0" && (r["failedAt"] != r0.Spec.FailedAt || r["mode"] != "ERR") {
			t.Errorf("the API shows vol-r-0 as %v", r)
		}
	}

	// vol-r-1 fails too (marked by hand): the volume does not attach, and
	// says why.
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	setFailedAt := func(name, at string) {
		t.Helper()
		err := datastore.RetryOnConflict(func() error {
			r, err := replicas.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			r.Spec.FailedAt = at
			_, err = replicas.Update(ctx, r, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	setFailedAt("vol-r-1", time.Now().UTC().Format(time.RFC3339))
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	var cond *longhorn.Condition
	framework.Eventually(t, 20*time.Second, "the Attach condition says every replica failed", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Reason == "AllReplicasFailed", nil
	})
	if cond.Status != longhorn.ConditionStatusFalse || !strings.Contains(cond.Message, "replica vol-r-0 failed at") ||
		!strings.Contains(cond.Message, "no space left on device") || !strings.Contains(cond.Message, "replica vol-r-1 failed at") {
		t.Errorf("Attach condition %+v", cond)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State == longhorn.VolumeStateAttached {
			t.Fatal("a volume whose replicas all failed attached")
		}
		if got.Status.Robustness != longhorn.VolumeRobustnessFaulted {
			t.Fatalf("robustness %q, want faulted", got.Status.Robustness)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Clearing vol-r-0's failedAt alone does not bring back its old data:
	// it is behind vol-r-1, failed or not.
	setFailedAt("vol-r-0", "")
	framework.Eventually(t, 20*time.Second, "the Attach condition says vol-r-0 is behind vol-r-1", func() (bool, error) {
		got, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "vol", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if got.Status.State == longhorn.VolumeStateAttached {
			return false, errors.New("the volume attached on a replica whose data is behind")
		}
		cond = volumeCondition(got, "Attach")
		return cond != nil && cond.Reason == "ReplicaDataBehind", nil
	})
	if cond.Status != longhorn.ConditionStatusFalse || !strings.Contains(cond.Message, "replica vol-r-0: its data is behind replica vol-r-1") {
		t.Errorf("Attach condition %+v", cond)
	}

	// Salvage: with every failedAt cleared the engine chooses; it opens
	// vol-r-1, whose data is the latest, and vol-r-0 fails again.
	setFailedAt("vol-r-1", "")
	v = e.WaitVolume(t, "vol", "salvaged and attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	if got := framework.DeviceContent(t, v["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the salvaged volume does not read the latest data")
	}
	framework.Eventually(t, 20*time.Second, "vol-r-0 failed again, its data behind", func() (bool, error) {
		r0, err = replicas.Get(ctx, "vol-r-0", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := volumeCondition(&longhorn.Volume{Status: longhorn.VolumeStatus{Conditions: r0.Status.Conditions}}, "Failed")
		return r0.Spec.FailedAt != "" && c != nil && c.Reason == "DataBehind" && strings.Contains(c.Message, "vol-r-1"), nil
	})
}
