//go:build e2e

package snapshot

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// A recurring job's retention shows as objects disappearing, never as
// objects left behind in error, and kubectl prunes a job's snapshots by
// label.
func TestSnapshotObjectsFollowARecurringJob(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	kubeconfig := framework.ServiceAccountKubeconfig(t, e.Cluster, e.NS)
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"keep2","task":"snapshot","cron":"@hourly","retain":2,"concurrency":1,"groups":["default"]}`).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) { return e.Call(t, "GET", "/v1/recurringjobs/keep2", "").Status == 200, nil })
	e.AttachedVolume(t, "vol")

	ticks := []string{"2026-11-22T01:00:00Z", "2026-11-22T02:00:00Z", "2026-11-22T03:00:00Z", "2026-11-22T04:00:00Z"}
	for _, tick := range ticks {
		if out := e.RunJob(t, kubeconfig, "keep2", tick); !strings.Contains(out, "succeeded=1 failed=0") {
			t.Fatalf("run at %s: %s", tick, out)
		}
	}
	// Each run takes one snapshot and deletes and purges the oldest beyond
	// 2: the objects of the first two ticks go, with no error left.
	framework.Eventually(t, 30*time.Second, "two objects, the newest ticks", func() (bool, error) {
		objs := e.JobSnapshotObjects(t, "vol", "keep2")
		if len(objs) != 2 {
			return false, nil
		}
		for _, s := range objs {
			tick := s.Status.Labels["RecurringJobTick"]
			if s.Status.Error != "" || !s.Status.ReadyToUse || (tick != "20261122T030000Z" && tick != "20261122T040000Z") {
				return false, nil
			}
		}
		return true, nil
	})
	for _, s := range e.JobSnapshotObjects(t, "vol", "keep2") {
		if s.Labels["RecurringJob"] != "keep2" {
			t.Fatalf("snapshot %s has object labels %v: no RecurringJob label to select it by", s.Name, s.Labels)
		}
	}

	// kubectl prunes the job's snapshots: engine snapshots deleted and
	// purged, objects gone; a user's snapshot on the same volume stays.
	e.Call(t, "POST", "/v1/volumes/vol?action=snapshotCreate", `{"name":"mine"}`).Expect(t, 200)
	framework.Eventually(t, 20*time.Second, "an object for the user's snapshot", func() (bool, error) {
		s, err := e.SnapshotObject(t, "mine")
		return err == nil && s.Status.ReadyToUse, nil
	})
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "-l", "RecurringJob=keep2", "--wait=false")
	framework.Eventually(t, 60*time.Second, "the job's snapshots gone from objects and engine", func() (bool, error) {
		if len(e.JobSnapshotObjects(t, "vol", "keep2")) != 0 {
			return false, nil
		}
		eng, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("vol"), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for name, s := range eng.Status.Snapshots {
			if s.Labels["RecurringJob"] == "keep2" && !s.Removed {
				return false, nil
			}
			if name == "mine" && s.Removed {
				return false, nil
			}
		}
		return true, nil
	})
	if s, err := e.SnapshotObject(t, "mine"); err != nil || !s.Status.ReadyToUse {
		t.Fatalf("the user's snapshot after the prune: %+v, %v", s, err)
	}
}

// A Snapshot being deleted is not ready to use; on a detached volume the
// deletion waits, with the reason, until the volume is attached. A
// snapshot that vanished from the engine without being deleted keeps its
// object, not ready, with an error saying so.
func TestSnapshotObjectsWhenDeletingOrVanished(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.AttachedVolume(t, "vol")
	for _, name := range []string{"first", "second", "third"} {
		e.Call(t, "POST", "/v1/volumes/vol?action=snapshotCreate", `{"name":"`+name+`"}`).Expect(t, 200)
	}
	framework.Eventually(t, 20*time.Second, "objects for the three snapshots", func() (bool, error) {
		for _, name := range []string{"first", "second", "third"} {
			if s, err := e.SnapshotObject(t, name); err != nil || !s.Status.ReadyToUse {
				return false, nil
			}
		}
		return true, nil
	})
	e.Call(t, "POST", "/v1/volumes/vol?action=detach", `{}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "detached", func(m map[string]any) bool { return m["state"] == "detached" })

	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "first", "--wait=false")
	framework.Eventually(t, 20*time.Second, "the deletion waits for an attached volume, saying so", func() (bool, error) {
		s, err := e.SnapshotObject(t, "first")
		return err == nil && s.DeletionTimestamp != nil && !s.Status.ReadyToUse && strings.Contains(s.Status.Error, "attached"), nil
	})

	// "third" vanishes while the volume is detached: the replica's record
	// of it is removed from under the engine (the head moves onto its
	// parent), as a lost disk would.
	forgetNewestSnapshot(t, e, "vol", "third", "second")

	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	framework.Eventually(t, 30*time.Second, "the deleted snapshot goes once attached", func() (bool, error) {
		_, err := e.SnapshotObject(t, "first")
		return apierrors.IsNotFound(err) && e.EngineSnapshot(t, "vol", "first") == nil, nil
	})
	framework.Eventually(t, 30*time.Second, "the vanished snapshot is kept, not ready, with why", func() (bool, error) {
		s, err := e.SnapshotObject(t, "third")
		return err == nil && !s.Status.ReadyToUse && strings.Contains(s.Status.Error, "gone from the engine"), nil
	})
	if s, err := e.SnapshotObject(t, "second"); err != nil || !s.Status.ReadyToUse || s.Status.Error != "" {
		t.Fatalf("the untouched snapshot: %+v, %v", s, err)
	}
	// The user can still delete what vanished.
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "third", "--wait=false")
	framework.Eventually(t, 20*time.Second, "the vanished snapshot's object deleted", func() (bool, error) {
		_, err := e.SnapshotObject(t, "third")
		return apierrors.IsNotFound(err), nil
	})
}

// forgetNewestSnapshot edits the only replica's volume.meta of a detached
// volume so that snapshot name (the head's parent) is gone and the head
// sits on parent.
func forgetNewestSnapshot(t *testing.T, e *framework.APIEnv, volume, name, parent string) {
	t.Helper()
	replicas, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{LabelSelector: "longhornvolume=" + volume})
	if err != nil || len(replicas.Items) != 1 {
		t.Fatalf("replicas of %s: %v, %v", volume, replicas, err)
	}
	r := replicas.Items[0]
	path := filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName, "volume.meta")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var snaps map[string]json.RawMessage
	if err := json.Unmarshal(meta["snapshots"], &snaps); err != nil {
		t.Fatal(err)
	}
	var headParent string
	if err := json.Unmarshal(meta["headParent"], &headParent); err != nil || headParent != name {
		t.Fatalf("the head's parent is %q (%v), not %s", headParent, err, name)
	}
	delete(snaps, name)
	meta["snapshots"], _ = json.Marshal(snaps)
	meta["headParent"], _ = json.Marshal(parent)
	out, _ := json.Marshal(meta)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
