//go:build e2e

package csisidecars

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The external-snapshotter's snapshot controller and csi-snapshotter
// sidecar, beside the provisioner and the attacher, on the snapshot CRDs
// of its client module (bin/snapshot-crds, copied from the module cache
// by scripts/build-csi-sidecars.sh).

// snapshotEnv is a sidecarEnv with the snapshot controller and the
// csi-snapshotter running too.
type snapshotEnv struct {
	*sidecarEnv
	dyn dynamic.Interface
}

func newSnapshotEnv(t *testing.T, opts ...func(*app.DaemonOptions)) *snapshotEnv {
	t.Helper()
	s := newSidecarEnv(t, opts...)
	bins := csiSidecars(t)
	framework.InstallSnapshotCRDs(t, s.Cluster.Config, bins.snapshotCRDs)
	dyn, err := dynamic.NewForConfig(s.Cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := sidecarKubeconfig(t, s.Cluster)
	startSidecar(t, bins.snapshotController, "--kubeconfig="+kubeconfig, "--leader-election=false", "-v=4")
	sock := serveCSIDriver(t, s.APIEnv, "node-1")
	startSidecar(t, bins.snapshotter, "--csi-address="+sock, "--kubeconfig="+kubeconfig, "--leader-election=false", "-v=4", "--timeout=120s")
	e := &snapshotEnv{sidecarEnv: s, dyn: dyn}
	// Cluster-wide objects do not go with the namespace; cleanups run last
	// first, so these go while the sidecars still run.
	t.Cleanup(func() { e.deleteSnapshotObjects(t) })
	return e
}

// deleteSnapshotObjects deletes the test's VolumeSnapshots (so the
// sidecars delete what they made), then its classes and contents.
func (e *snapshotEnv) deleteSnapshotObjects(t testing.TB) {
	ctx := context.Background()
	_ = e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	mine := func(u unstructured.Unstructured) bool {
		ns, _, _ := unstructured.NestedString(u.Object, "spec", "volumeSnapshotRef", "namespace")
		return ns == e.NS || strings.HasPrefix(u.GetName(), e.prefix)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list, err := e.dyn.Resource(framework.VolumeSnapshotContents).List(ctx, metav1.ListOptions{})
		left := 0
		if err == nil {
			for _, c := range list.Items {
				if mine(c) {
					left++
				}
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if list, err := e.dyn.Resource(framework.VolumeSnapshotContents).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if mine(c) {
				_, _ = e.dyn.Resource(framework.VolumeSnapshotContents).Patch(ctx, c.GetName(), "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				_ = e.dyn.Resource(framework.VolumeSnapshotContents).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	if list, err := e.dyn.Resource(framework.VolumeSnapshotClasses).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if strings.HasPrefix(c.GetName(), e.prefix) {
				_ = e.dyn.Resource(framework.VolumeSnapshotClasses).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
			}
		}
	}
}

// snapshotClass makes a VolumeSnapshotClass of the driver, deletionPolicy
// Delete, with these parameters.
func (e *snapshotEnv) snapshotClass(t *testing.T, name string, params map[string]any) string {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": e.prefix + "-" + name},
		"driver":   csi.DriverName, "deletionPolicy": "Delete", "parameters": params,
	}}
	if _, err := e.dyn.Resource(framework.VolumeSnapshotClasses).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return obj.GetName()
}

// volumeSnapshot makes a VolumeSnapshot of the claim with the class.
func (e *snapshotEnv) volumeSnapshot(t *testing.T, name, class, claim string) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"volumeSnapshotClassName": class,
			"source":                  map[string]any{"persistentVolumeClaimName": claim},
		},
	}}
	if _, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// snapshotReady waits until the VolumeSnapshot is readyToUse and returns
// its content's snapshot handle and restore size.
func (e *snapshotEnv) snapshotReady(t *testing.T, name string) (handle string, restoreSize string) {
	t.Helper()
	ctx := context.Background()
	var content string
	framework.Eventually(t, sidecarWait, "VolumeSnapshot "+name+" readyToUse", func() (bool, error) {
		vs, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if msg, ok, _ := unstructured.NestedString(vs.Object, "status", "error", "message"); ok {
			t.Logf("VolumeSnapshot %s: %s", name, msg)
		}
		ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
		content, _, _ = unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
		restoreSize, _, _ = unstructured.NestedString(vs.Object, "status", "restoreSize")
		return ready && content != "", nil
	})
	c, err := e.dyn.Resource(framework.VolumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	handle, _, _ = unstructured.NestedString(c.Object, "status", "snapshotHandle")
	return handle, restoreSize
}

// snapshotFailed waits until the VolumeSnapshot shows an error, and
// returns its message; the snapshot must not be readyToUse.
func (e *snapshotEnv) snapshotFailed(t *testing.T, name string) string {
	t.Helper()
	var msg string
	framework.Eventually(t, sidecarWait, "VolumeSnapshot "+name+" shows an error", func() (bool, error) {
		vs, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse"); ready {
			t.Fatalf("VolumeSnapshot %s is readyToUse: want it refused", name)
		}
		msg, _, _ = unstructured.NestedString(vs.Object, "status", "error", "message")
		return msg != "", nil
	})
	return msg
}

// creationFailedEvent waits for the csi-snapshotter's SnapshotCreationFailed
// event on the VolumeSnapshot's content (cluster-wide, so its events are
// in the default namespace) and returns its message.
func (e *snapshotEnv) creationFailedEvent(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	var msg string
	framework.Eventually(t, sidecarWait, "a SnapshotCreationFailed event on the content of VolumeSnapshot "+name, func() (bool, error) {
		vs, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
		if content == "" {
			return false, nil
		}
		events, err := e.Kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": content, "reason": "SnapshotCreationFailed"}.String()})
		if err != nil || len(events.Items) == 0 {
			return false, err
		}
		msg = events.Items[0].Message
		return true, nil
	})
	return msg
}

// deleteVolumeSnapshot deletes the VolumeSnapshot and waits until it and
// its content are gone.
func (e *snapshotEnv) deleteVolumeSnapshot(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	vs, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	if err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, sidecarWait, "VolumeSnapshot "+name+" and its content "+content+" gone", func() (bool, error) {
		_, err := e.dyn.Resource(framework.VolumeSnapshots).Namespace(e.NS).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		if content == "" {
			return true, nil
		}
		_, err = e.dyn.Resource(framework.VolumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
