package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/csi"
)

// The external-snapshotter's snapshot controller and csi-snapshotter
// sidecar, beside the provisioner and the attacher, on the snapshot CRDs
// of its client module (bin/snapshot-crds, copied from the module cache
// by scripts/build-csi-sidecars.sh).

var (
	volumeSnapshotClasses  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	volumeSnapshots        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	volumeSnapshotContents = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// snapshotEnv is a sidecarEnv with the snapshot controller and the
// csi-snapshotter running too.
type snapshotEnv struct {
	*sidecarEnv
	dyn dynamic.Interface
}

func newSnapshotEnv(t *testing.T) *snapshotEnv {
	t.Helper()
	s := newSidecarEnv(t)
	bins := csiSidecars(t)
	installSnapshotCRDs(t, s.cluster.Config, bins.snapshotCRDs)
	dyn, err := dynamic.NewForConfig(s.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := sidecarKubeconfig(t, s.cluster)
	startSidecar(t, bins.snapshotController, "--kubeconfig="+kubeconfig, "--leader-election=false", "-v=4")
	sock := serveCSIDriver(t, s.apiEnv, "node-1")
	startSidecar(t, bins.snapshotter, "--csi-address="+sock, "--kubeconfig="+kubeconfig, "--leader-election=false", "-v=4", "--timeout=120s")
	e := &snapshotEnv{sidecarEnv: s, dyn: dyn}
	// Cluster-wide objects do not go with the namespace; cleanups run last
	// first, so these go while the sidecars still run.
	t.Cleanup(func() { e.deleteSnapshotObjects(t) })
	return e
}

// installSnapshotCRDs creates the snapshot CRDs once in the control plane
// (a test before may have) and waits until they are served.
func installSnapshotCRDs(t *testing.T, cfg *rest.Config, dir string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("the snapshot CRDs in %s: %v, %v (run scripts/build-csi-sidecars.sh)", dir, files, err)
	}
	client, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	api := client.ApiextensionsV1().CustomResourceDefinitions()
	ctx := context.Background()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, err := api.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		eventually(t, 30*time.Second, "CRD "+crd.Name+" Established", func() (bool, error) {
			got, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// deleteSnapshotObjects deletes the test's VolumeSnapshots (so the
// sidecars delete what they made), then its classes and contents.
func (e *snapshotEnv) deleteSnapshotObjects(t testing.TB) {
	ctx := context.Background()
	_ = e.dyn.Resource(volumeSnapshots).Namespace(e.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	mine := func(u unstructured.Unstructured) bool {
		ns, _, _ := unstructured.NestedString(u.Object, "spec", "volumeSnapshotRef", "namespace")
		return ns == e.ns || strings.HasPrefix(u.GetName(), e.prefix)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		list, err := e.dyn.Resource(volumeSnapshotContents).List(ctx, metav1.ListOptions{})
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
	if list, err := e.dyn.Resource(volumeSnapshotContents).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if mine(c) {
				_, _ = e.dyn.Resource(volumeSnapshotContents).Patch(ctx, c.GetName(), "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				_ = e.dyn.Resource(volumeSnapshotContents).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
			}
		}
	}
	if list, err := e.dyn.Resource(volumeSnapshotClasses).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range list.Items {
			if strings.HasPrefix(c.GetName(), e.prefix) {
				_ = e.dyn.Resource(volumeSnapshotClasses).Delete(ctx, c.GetName(), metav1.DeleteOptions{})
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
	if _, err := e.dyn.Resource(volumeSnapshotClasses).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
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
	if _, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// snapshotReady waits until the VolumeSnapshot is readyToUse and returns
// its content's snapshot handle and restore size.
func (e *snapshotEnv) snapshotReady(t *testing.T, name string) (handle string, restoreSize string) {
	t.Helper()
	ctx := context.Background()
	var content string
	eventually(t, sidecarWait, "VolumeSnapshot "+name+" readyToUse", func() (bool, error) {
		vs, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
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
	c, err := e.dyn.Resource(volumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
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
	eventually(t, sidecarWait, "VolumeSnapshot "+name+" shows an error", func() (bool, error) {
		vs, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Get(context.Background(), name, metav1.GetOptions{})
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
	eventually(t, sidecarWait, "a SnapshotCreationFailed event on the content of VolumeSnapshot "+name, func() (bool, error) {
		vs, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
		if content == "" {
			return false, nil
		}
		events, err := e.kube.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: fields.Set{"involvedObject.name": content, "reason": "SnapshotCreationFailed"}.String()})
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
	vs, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	content, _, _ := unstructured.NestedString(vs.Object, "status", "boundVolumeSnapshotContentName")
	if err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, sidecarWait, "VolumeSnapshot "+name+" and its content "+content+" gone", func() (bool, error) {
		_, err := e.dyn.Resource(volumeSnapshots).Namespace(e.ns).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		if content == "" {
			return true, nil
		}
		_, err = e.dyn.Resource(volumeSnapshotContents).Get(ctx, content, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}
