//go:build e2e

package snapshot

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

func TestSnapshotObjectsLifeCycle(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })

	// Created by a user with kubectl: labelled and finalized at admission
	// (package/components/mutating-policies/admission.yaml), then taken in the engine. No admission
	// policy can give it the owner reference (it needs the Volume's UID);
	// the volume's deletion below deletes it by its label.
	e.Cluster.Kubectl(t, `apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: by-user
spec:
  volume: vol
  createSnapshot: true
  labels: {purpose: test}
`, "-n", e.NS, "apply", "-f", "-")
	framework.Eventually(t, 20*time.Second, "user snapshot taken and ready", func() (bool, error) {
		s, err := e.SnapshotObject(t, "by-user")
		if err != nil {
			return false, nil
		}
		return s.Labels["longhornvolume"] == "vol" && slices.Contains(s.Finalizers, "longhorn.io") &&
			s.Status.ReadyToUse && s.Status.CreationTime != "" && s.Status.Labels["purpose"] == "test" &&
			e.EngineSnapshot(t, "vol", "by-user") != nil, nil
	})

	// Taken through the API: the object appears by itself.
	e.Call(t, "POST", "/v1/volumes/vol?action=snapshotCreate", `{"name":"by-api"}`).Expect(t, 200)
	framework.Eventually(t, 20*time.Second, "an object for the API's snapshot", func() (bool, error) {
		s, err := e.SnapshotObject(t, "by-api")
		return err == nil && !s.Spec.CreateSnapshot && s.Status.ReadyToUse && s.Status.Parent == "by-user", nil
	})
	out := e.Cluster.Kubectl(t, "", "-n", e.NS, "get", "lhsnap")
	if !strings.Contains(out, "by-user") || !strings.Contains(out, "by-api") {
		t.Errorf("kubectl get lhsnap:\n%s", out)
	}

	// kubectl delete: the engine snapshot goes (merged into its child by a
	// purge), then the object.
	e.Cluster.Kubectl(t, "", "-n", e.NS, "delete", "lhsnap", "by-user", "--wait=false")
	framework.Eventually(t, 30*time.Second, "deleted snapshot gone from object and engine", func() (bool, error) {
		_, err := e.SnapshotObject(t, "by-user")
		return apierrors.IsNotFound(err) && e.EngineSnapshot(t, "vol", "by-user") == nil, nil
	})
	// The remaining snapshot's object follows the engine in the volume's
	// next round of status writes (at most one per 5 s).
	framework.Eventually(t, 20*time.Second, "the remaining snapshot's object without a parent", func() (bool, error) {
		s, err := e.SnapshotObject(t, "by-api")
		if err != nil {
			return false, err
		}
		if !s.Status.ReadyToUse {
			t.Fatalf("the remaining snapshot after the purge is not ready: %+v", s.Status)
		}
		return s.Status.Parent == "", nil
	})

	// Deleting the volume waits for its snapshots, which go with it.
	e.Call(t, "DELETE", "/v1/volumes/vol", "").Expect(t, 204)
	framework.Eventually(t, 30*time.Second, "volume and snapshots gone", func() (bool, error) {
		_, errV := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "vol", metav1.GetOptions{})
		list, err := e.LH.LonghornV1beta2().Snapshots(e.NS).List(context.Background(), metav1.ListOptions{})
		return apierrors.IsNotFound(errV) && err == nil && len(list.Items) == 0, nil
	})
}
