//go:build e2e

package snapshot

import (
	"bytes"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// kubectl delete of the newest snapshot of an attached volume (the parent
// of its head) returns within seconds, the snapshot is gone from the
// engine, and the volume reads what it read.
func TestDeletingTheNewestSnapshotOfAnAttachedVolume(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":2}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	endpoint := v["endpoint"].(string)

	framework.QemuIO(t, endpoint, "write -P 0xab 0 1M", "flush")
	e.CreateSnapshotObject(t, "vol", "older")
	framework.QemuIO(t, endpoint, "write -P 0xcd 512K 1M", "flush")
	e.CreateSnapshotObject(t, "vol", "newest")
	// The head holds some of what the newest snapshot holds, and more.
	framework.QemuIO(t, endpoint, "write -P 0xef 1M 1M", "flush")
	before := framework.DeviceContent(t, endpoint)

	// A plain kubectl delete waits for the object to be gone.
	start := time.Now()
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "newest", "--timeout=60s")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("kubectl delete of the newest snapshot took %s", took)
	}
	if _, err := e.SnapshotObject(t, "newest"); !apierrors.IsNotFound(err) {
		t.Fatalf("the newest snapshot's object after kubectl delete: %v", err)
	}
	framework.Eventually(t, 10*time.Second, "the newest snapshot gone from the engine, the head on the older one", func() (bool, error) {
		head := e.EngineSnapshot(t, "vol", "volume-head")
		return e.EngineSnapshot(t, "vol", "newest") == nil && head != nil && head.Parent == "older", nil
	})
	if !bytes.Equal(framework.DeviceContent(t, endpoint), before) {
		t.Fatal("deleting the newest snapshot changed what the volume reads")
	}
	if s, err := e.SnapshotObject(t, "older"); err != nil || !s.Status.ReadyToUse || s.Status.MarkRemoved {
		t.Fatalf("the older snapshot: %+v, %v", s, err)
	}

	// Now the older one is the newest: while it is being deleted (held
	// here by a finalizer of the test's, so the status can be read) its
	// status says so.
	e.SetHold(t, "older", true)
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "older", "--wait=false")
	framework.Eventually(t, 20*time.Second, "the snapshot being deleted is marked removed and not ready", func() (bool, error) {
		s, err := e.SnapshotObject(t, "older")
		return err == nil && s.DeletionTimestamp != nil && s.Status.MarkRemoved && !s.Status.ReadyToUse &&
			e.EngineSnapshot(t, "vol", "older") == nil, nil
	})
	e.SetHold(t, "older", false)
	framework.Eventually(t, 10*time.Second, "the object gone once the test lets go", func() (bool, error) {
		_, err := e.SnapshotObject(t, "older")
		return apierrors.IsNotFound(err), nil
	})
	if !bytes.Equal(framework.DeviceContent(t, endpoint), before) {
		t.Fatal("deleting the last snapshot changed what the volume reads")
	}
}

// On a detached volume a deleted snapshot's status says what its deletion
// waits for; once the volume is attached the deletion completes by itself
// and the data is unchanged.
func TestDeletingASnapshotOfADetachedVolumeWaitsForAttach(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0xab 0 1M", "flush")
	e.CreateSnapshotObject(t, "vol", "snap")
	framework.QemuIO(t, v["endpoint"].(string), "write -P 0xcd 256K 256K", "flush")
	before := framework.DeviceContent(t, v["endpoint"].(string))
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(m map[string]any) bool { return m["state"] == "detached" })

	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "snap", "--wait=false")
	framework.Eventually(t, 20*time.Second, "the status says the deletion waits for an attach", func() (bool, error) {
		s, err := e.SnapshotObject(t, "snap")
		return err == nil && s.DeletionTimestamp != nil && !s.Status.ReadyToUse && !s.Status.MarkRemoved &&
			strings.Contains(s.Status.Error, "waits for volume vol to be attached"), nil
	})

	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "vol", "attached again", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	framework.Eventually(t, 20*time.Second, "the deletion done once attached", func() (bool, error) {
		_, err := e.SnapshotObject(t, "snap")
		return apierrors.IsNotFound(err) && e.EngineSnapshot(t, "vol", "snap") == nil, nil
	})
	if !bytes.Equal(framework.DeviceContent(t, v["endpoint"].(string)), before) {
		t.Fatal("the deletion changed what the volume reads")
	}
}

// A deleted snapshot with several children (after a revert to it) cannot
// be merged: its status says what the deletion waits for, and once all
// but one child are deleted it goes by itself.
func TestDeletingASnapshotWithSeveralChildrenWaitsForOne(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1","disableFrontend":true}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached without a frontend", func(m map[string]any) bool {
		return m["state"] == "attached" && m["frontendDisabled"] == true
	})
	e.CreateSnapshotObject(t, "vol", "base")
	e.CreateSnapshotObject(t, "vol", "later")
	e.Call(t, "POST", "/v1/volumes/vol?action=snapshotRevert", `{"name":"base"}`).Expect(t, 200)

	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "base", "--wait=false")
	framework.Eventually(t, 20*time.Second, "the status says the deletion waits for one child", func() (bool, error) {
		s, err := e.SnapshotObject(t, "base")
		return err == nil && s.Status.MarkRemoved && !s.Status.ReadyToUse &&
			strings.Contains(s.Status.Error, "children (later, volume-head)"), nil
	})
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "later", "--timeout=30s")
	framework.Eventually(t, 20*time.Second, "the waiting deletion done once one child is left", func() (bool, error) {
		_, err := e.SnapshotObject(t, "base")
		head := e.EngineSnapshot(t, "vol", "volume-head")
		return apierrors.IsNotFound(err) && e.EngineSnapshot(t, "vol", "base") == nil && head != nil && head.Parent == "", nil
	})
}
