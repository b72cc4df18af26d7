package app

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

const testHoldFinalizer = "test.longhorn.io/hold"

// createSnapshotObject applies a Snapshot object with createSnapshot true
// and waits until it is ready to use.
func (e *apiEnv) createSnapshotObject(t *testing.T, volume, name string) {
	t.Helper()
	e.cluster.Kubectl(t, `apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: `+name+`
spec:
  volume: `+volume+`
  createSnapshot: true
`, "-n", e.ns, "apply", "-f", "-")
	eventually(t, 20*time.Second, name+" ready to use", func() (bool, error) {
		s, err := e.snapshotObject(t, name)
		return err == nil && s.Status.ReadyToUse && e.engineSnapshot(t, volume, name) != nil, nil
	})
}

// setHold adds or removes a finalizer of the test's own, which keeps a
// deleted object visible after the manager has released its own.
func (e *apiEnv) setHold(t *testing.T, name string, on bool) {
	t.Helper()
	// The patch carries the resource version, so it never drops a
	// finalizer the controller added meanwhile; the controller writes the
	// object too (its status), so a conflict is read again and retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := e.snapshotObject(t, name)
		if err != nil {
			return err
		}
		var fins []string
		for _, f := range s.Finalizers {
			if f != testHoldFinalizer {
				fins = append(fins, f)
			}
		}
		if on {
			fins = append(fins, testHoldFinalizer)
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
			"finalizers": fins, "resourceVersion": s.ResourceVersion,
		}})
		_, err = e.lh.LonghornV1beta2().Snapshots(e.ns).Patch(context.Background(), name, k8stypes.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// kubectl delete of the newest snapshot of an attached volume (the parent
// of its head) returns within seconds, the snapshot is gone from the
// engine, and the volume reads what it read.
func TestDeletingTheNewestSnapshotOfAnAttachedVolume(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":2}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolume(t, "vol", "attached", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	endpoint := v["endpoint"].(string)

	qemuIO(t, endpoint, "write -P 0xab 0 1M", "flush")
	e.createSnapshotObject(t, "vol", "older")
	qemuIO(t, endpoint, "write -P 0xcd 512K 1M", "flush")
	e.createSnapshotObject(t, "vol", "newest")
	// The head holds some of what the newest snapshot holds, and more.
	qemuIO(t, endpoint, "write -P 0xef 1M 1M", "flush")
	before := deviceContent(t, endpoint)

	// A plain kubectl delete waits for the object to be gone.
	start := time.Now()
	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "newest", "--timeout=60s")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("kubectl delete of the newest snapshot took %s", took)
	}
	if _, err := e.snapshotObject(t, "newest"); !apierrors.IsNotFound(err) {
		t.Fatalf("the newest snapshot's object after kubectl delete: %v", err)
	}
	eventually(t, 10*time.Second, "the newest snapshot gone from the engine, the head on the older one", func() (bool, error) {
		head := e.engineSnapshot(t, "vol", "volume-head")
		return e.engineSnapshot(t, "vol", "newest") == nil && head != nil && head.Parent == "older", nil
	})
	if !bytes.Equal(deviceContent(t, endpoint), before) {
		t.Fatal("deleting the newest snapshot changed what the volume reads")
	}
	if s, err := e.snapshotObject(t, "older"); err != nil || !s.Status.ReadyToUse || s.Status.MarkRemoved {
		t.Fatalf("the older snapshot: %+v, %v", s, err)
	}

	// Now the older one is the newest: while it is being deleted (held
	// here by a finalizer of the test's, so the status can be read) its
	// status says so.
	e.setHold(t, "older", true)
	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "older", "--wait=false")
	eventually(t, 20*time.Second, "the snapshot being deleted is marked removed and not ready", func() (bool, error) {
		s, err := e.snapshotObject(t, "older")
		return err == nil && s.DeletionTimestamp != nil && s.Status.MarkRemoved && !s.Status.ReadyToUse &&
			e.engineSnapshot(t, "vol", "older") == nil, nil
	})
	e.setHold(t, "older", false)
	eventually(t, 10*time.Second, "the object gone once the test lets go", func() (bool, error) {
		_, err := e.snapshotObject(t, "older")
		return apierrors.IsNotFound(err), nil
	})
	if !bytes.Equal(deviceContent(t, endpoint), before) {
		t.Fatal("deleting the last snapshot changed what the volume reads")
	}
}

// On a detached volume a deleted snapshot's status says what its deletion
// waits for; once the volume is attached the deletion completes by itself
// and the data is unchanged.
func TestDeletingASnapshotOfADetachedVolumeWaitsForAttach(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v := e.waitVolume(t, "vol", "attached", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	qemuIO(t, v["endpoint"].(string), "write -P 0xab 0 1M", "flush")
	e.createSnapshotObject(t, "vol", "snap")
	qemuIO(t, v["endpoint"].(string), "write -P 0xcd 256K 256K", "flush")
	before := deviceContent(t, v["endpoint"].(string))
	e.call(t, "POST", "/v1/volumes/vol?action=detach", "").expect(t, 200)
	e.waitVolume(t, "vol", "detached", func(m map[string]any) bool { return m["state"] == "detached" })

	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "snap", "--wait=false")
	eventually(t, 20*time.Second, "the status says the deletion waits for an attach", func() (bool, error) {
		s, err := e.snapshotObject(t, "snap")
		return err == nil && s.DeletionTimestamp != nil && !s.Status.ReadyToUse && !s.Status.MarkRemoved &&
			strings.Contains(s.Status.Error, "waits for volume vol to be attached"), nil
	})

	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v = e.waitVolume(t, "vol", "attached again", func(m map[string]any) bool {
		return m["state"] == "attached" && strings.HasPrefix(m["endpoint"].(string), "nbd://")
	})
	eventually(t, 20*time.Second, "the deletion done once attached", func() (bool, error) {
		_, err := e.snapshotObject(t, "snap")
		return apierrors.IsNotFound(err) && e.engineSnapshot(t, "vol", "snap") == nil, nil
	})
	if !bytes.Equal(deviceContent(t, v["endpoint"].(string)), before) {
		t.Fatal("the deletion changed what the volume reads")
	}
}

// A deleted snapshot with several children (after a revert to it) cannot
// be merged: its status says what the deletion waits for, and once all
// but one child are deleted it goes by itself.
func TestDeletingASnapshotWithSeveralChildrenWaitsForOne(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1","disableFrontend":true}`).expect(t, 200)
	e.waitVolume(t, "vol", "attached without a frontend", func(m map[string]any) bool {
		return m["state"] == "attached" && m["frontendDisabled"] == true
	})
	e.createSnapshotObject(t, "vol", "base")
	e.createSnapshotObject(t, "vol", "later")
	e.call(t, "POST", "/v1/volumes/vol?action=snapshotRevert", `{"name":"base"}`).expect(t, 200)

	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "base", "--wait=false")
	eventually(t, 20*time.Second, "the status says the deletion waits for one child", func() (bool, error) {
		s, err := e.snapshotObject(t, "base")
		return err == nil && s.Status.MarkRemoved && !s.Status.ReadyToUse &&
			strings.Contains(s.Status.Error, "children (later, volume-head)"), nil
	})
	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "later", "--timeout=30s")
	eventually(t, 20*time.Second, "the waiting deletion done once one child is left", func() (bool, error) {
		_, err := e.snapshotObject(t, "base")
		head := e.engineSnapshot(t, "vol", "volume-head")
		return apierrors.IsNotFound(err) && e.engineSnapshot(t, "vol", "base") == nil && head != nil && head.Parent == "", nil
	})
}
