package app

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func (e *apiEnv) snapshotObject(t *testing.T, name string) (*longhorn.Snapshot, error) {
	t.Helper()
	return e.lh.LonghornV1beta2().Snapshots(e.ns).Get(context.Background(), name, metav1.GetOptions{})
}

// engineSnapshot is the entry of a snapshot in the volume's engine, read
// from the engine through the API's snapshotGet (nil when the engine has
// none or the volume is not attached). The Engine object's status lists
// the same entries, its list mirrored at a pace of its own.
func (e *apiEnv) engineSnapshot(t *testing.T, volume, name string) *longhorn.SnapshotInfo {
	t.Helper()
	resp := e.call(t, "POST", "/v1/volumes/"+volume+"?action=snapshotGet", `{"name":"`+name+`"}`)
	if resp.status != http.StatusOK {
		return nil
	}
	var info longhorn.SnapshotInfo
	if err := json.Unmarshal([]byte(resp.raw), &info); err != nil {
		t.Fatalf("snapshotGet %s of volume %s: %v", name, volume, err)
	}
	return &info
}

func TestSnapshotObjectsLifeCycle(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).expect(t, 200)
	e.waitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	e.waitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })

	// Created by a user with kubectl: labelled and finalized at admission
	// (package/admission.yaml), then taken in the engine. No admission
	// policy can give it the owner reference (it needs the Volume's UID);
	// the volume's deletion below deletes it by its label.
	e.cluster.Kubectl(t, `apiVersion: longhorn.io/v1beta2
kind: Snapshot
metadata:
  name: by-user
spec:
  volume: vol
  createSnapshot: true
  labels: {purpose: test}
`, "-n", e.ns, "apply", "-f", "-")
	eventually(t, 20*time.Second, "user snapshot taken and ready", func() (bool, error) {
		s, err := e.snapshotObject(t, "by-user")
		if err != nil {
			return false, nil
		}
		return s.Labels["longhornvolume"] == "vol" && slices.Contains(s.Finalizers, "longhorn.io") &&
			s.Status.ReadyToUse && s.Status.CreationTime != "" && s.Status.Labels["purpose"] == "test" &&
			e.engineSnapshot(t, "vol", "by-user") != nil, nil
	})

	// Taken through the API: the object appears by itself.
	e.call(t, "POST", "/v1/volumes/vol?action=snapshotCreate", `{"name":"by-api"}`).expect(t, 200)
	eventually(t, 20*time.Second, "an object for the API's snapshot", func() (bool, error) {
		s, err := e.snapshotObject(t, "by-api")
		return err == nil && !s.Spec.CreateSnapshot && s.Status.ReadyToUse && s.Status.Parent == "by-user", nil
	})
	out := e.cluster.Kubectl(t, "", "-n", e.ns, "get", "lhsnap")
	if !strings.Contains(out, "by-user") || !strings.Contains(out, "by-api") {
		t.Errorf("kubectl get lhsnap:\n%s", out)
	}

	// kubectl delete: the engine snapshot goes (merged into its child by a
	// purge), then the object.
	e.cluster.Kubectl(t, "", "-n", e.ns, "delete", "lhsnap", "by-user", "--wait=false")
	eventually(t, 30*time.Second, "deleted snapshot gone from object and engine", func() (bool, error) {
		_, err := e.snapshotObject(t, "by-user")
		return apierrors.IsNotFound(err) && e.engineSnapshot(t, "vol", "by-user") == nil, nil
	})
	// The remaining snapshot's object follows the engine in the volume's
	// next round of status writes (at most one per 5 s).
	eventually(t, 20*time.Second, "the remaining snapshot's object without a parent", func() (bool, error) {
		s, err := e.snapshotObject(t, "by-api")
		if err != nil {
			return false, err
		}
		if !s.Status.ReadyToUse {
			t.Fatalf("the remaining snapshot after the purge is not ready: %+v", s.Status)
		}
		return s.Status.Parent == "", nil
	})

	// Deleting the volume waits for its snapshots, which go with it.
	e.call(t, "DELETE", "/v1/volumes/vol", "").expect(t, 204)
	eventually(t, 30*time.Second, "volume and snapshots gone", func() (bool, error) {
		_, errV := e.lh.LonghornV1beta2().Volumes(e.ns).Get(context.Background(), "vol", metav1.GetOptions{})
		list, err := e.lh.LonghornV1beta2().Snapshots(e.ns).List(context.Background(), metav1.ListOptions{})
		return apierrors.IsNotFound(errV) && err == nil && len(list.Items) == 0, nil
	})
}
