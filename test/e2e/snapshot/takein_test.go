//go:build e2e

package snapshot

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/controller/kit"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestANewSnapshotIsTakenInWithoutAMetadataWrite: in the manager's
// namespace the apiserver gives a new Snapshot its volume label and
// Longhorn's finalizer (package/components/mutating-policies/admission.yaml), whatever label the
// creator wrote, and the manager takes it in with its status write
// alone. In a namespace without the label the manager writes the label,
// the finalizer and an owner reference to the Volume first: two writes.
func TestANewSnapshotIsTakenInWithoutAMetadataWrite(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	for _, c := range []struct {
		name            string
		ns              string
		mutatedAtCreate bool
		writes          int
	}{
		{"manager namespace", cluster.NewNamespace(t), true, 1},
		{"unlabelled namespace", cluster.NewPlainNamespace(t), false, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := framework.NewAPIEnvIn(t, c.ns)
			e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
			e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
			e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
			e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
			vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "vol", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}

			snaps := e.LH.LonghornV1beta2().Snapshots(e.NS)
			// A wrong volume label and a finalizer of the user's: the
			// label is corrected, the finalizer kept beside Longhorn's.
			created, err := snaps.Create(context.Background(), &longhorn.Snapshot{
				ObjectMeta: metav1.ObjectMeta{
					Name:       "by-user",
					Labels:     map[string]string{types.LabelVolume: "another", "team": "db"},
					Finalizers: []string{"example.com/keep"},
				},
				Spec: longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			linked := func(s *longhorn.Snapshot) bool {
				return s.Labels[types.LabelVolume] == "vol" && s.Labels["team"] == "db" &&
					kit.HasFinalizer(s) && slices.Contains(s.Finalizers, "example.com/keep")
			}
			if linked(created) != c.mutatedAtCreate {
				t.Fatalf("created with labels %v and finalizers %v; label and finalizer at creation: want %v",
					created.Labels, created.Finalizers, c.mutatedAtCreate)
			}

			writes, last := framework.WritesUntil(t, snaps, created, "ready", snapshotReady)
			if !linked(last) {
				t.Errorf("taken in with labels %v and finalizers %v", last.Labels, last.Finalizers)
			}
			if !c.mutatedAtCreate && (len(last.OwnerReferences) != 1 || last.OwnerReferences[0].UID != vol.UID) {
				t.Errorf("the manager's metadata write gave owner references %+v, want the Volume's", last.OwnerReferences)
			}
			if writes != c.writes {
				t.Errorf("taken in with %d writes, want %d", writes, c.writes)
			}
			if e.EngineSnapshot(t, "vol", "by-user") == nil {
				t.Error("the engine has no snapshot by-user")
			}

			// Through the API (the UI's snapshotCRCreate) the object is
			// created with its label, finalizer and owner, in any
			// namespace: its status write alone.
			resp := e.Call(t, "POST", "/v1/volumes/vol?action=snapshotCRCreate", `{"name":"by-ui"}`).Expect(t, 200)
			if resp.Body["name"] != "by-ui" {
				t.Fatalf("snapshotCRCreate answered %v", resp.Body)
			}
			byUI, err := snaps.Get(context.Background(), "by-ui", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !kit.HasFinalizer(byUI) || len(byUI.OwnerReferences) != 1 || byUI.OwnerReferences[0].UID != vol.UID {
				t.Errorf("snapshotCRCreate made finalizers %v, owner references %+v", byUI.Finalizers, byUI.OwnerReferences)
			}
			if byUI.Status.ReadyToUse {
				t.Log("by-ui was ready before the watch began")
			} else if writes, _ := framework.WritesUntil(t, snaps, byUI, "ready", snapshotReady); writes != 1 {
				t.Errorf("the API's Snapshot was taken in with %d writes, want 1", writes)
			}

			// The volume's deletion takes the snapshot with it, owner
			// reference or not; the user's own finalizer is theirs to drop.
			e.Call(t, "DELETE", "/v1/volumes/vol", "").Expect(t, 204)
			framework.Eventually(t, 30*time.Second, "Longhorn's finalizer released", func() (bool, error) {
				s, err := e.SnapshotObject(t, "by-user")
				return err == nil && s.DeletionTimestamp != nil && !kit.HasFinalizer(s), nil
			})
			// The volume waits for it; once the user lets it go, both go.
			if _, err := snaps.Patch(context.Background(), "by-user", k8stypes.MergePatchType,
				[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
			framework.Eventually(t, 30*time.Second, "the volume and its snapshots gone", func() (bool, error) {
				_, errV := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "vol", metav1.GetOptions{})
				list, err := snaps.List(context.Background(), metav1.ListOptions{})
				return apierrors.IsNotFound(errV) && err == nil && len(list.Items) == 0, nil
			})
		})
	}
}

// snapshotReady: taken, with its engine snapshot's time.
func snapshotReady(s *longhorn.Snapshot) bool {
	return s.Status.ReadyToUse && s.Status.CreationTime != ""
}

// TestSnapshotsCreatedWhileNoManagerRunsAreTaken: Snapshot objects created
// while the manager is down (an upgrade, a crash) are taken once it is
// back. Its volume's Engine still says running from before, so no change
// of state brings them back to the controller: the engine's start on this
// node does, as it does for a deletion that waited for the engine.
func TestSnapshotsCreatedWhileNoManagerRunsAreTaken(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	dataDir, cfg := t.TempDir(), cluster.ServiceAccountConfig(ns, framework.ServiceAccount)
	// The engine keeps its address across the restart, as a node's port.
	engineAddress := framework.FreeAddress(t)
	withEngineAddress := func(o *app.DaemonOptions) { o.EngineAddress = engineAddress }
	d := framework.StartDaemon(t, cfg, ns, "node-1", dataDir, withEngineAddress)
	e := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: framework.LHClient(t, cluster.Config)}, Base: "http://" + d.APIAddress}
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "created", func(m map[string]any) bool { return m["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1","disableFrontend":true}`).Expect(t, 200)
	e.WaitVolume(t, "vol", "attached", func(m map[string]any) bool { return m["state"] == "attached" })
	e.CreateSnapshotObject(t, "vol", "before")
	d.Stop(t)

	names := []string{"while-down-1", "while-down-2", "while-down-3"}
	for _, name := range names {
		if _, err := e.LH.LonghornV1beta2().Snapshots(ns).Create(context.Background(), &longhorn.Snapshot{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       longhorn.SnapshotSpec{Volume: "vol", CreateSnapshot: true},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d = framework.StartDaemon(t, cfg, ns, "node-1", dataDir, withEngineAddress)
	e.Base = "http://" + d.APIAddress
	for _, name := range append(names, "before") {
		framework.Eventually(t, 30*time.Second, name+" taken by the engine and ready", func() (bool, error) {
			s, err := e.SnapshotObject(t, name)
			return err == nil && snapshotReady(s) && e.EngineSnapshot(t, "vol", name) != nil, nil
		})
	}
}
