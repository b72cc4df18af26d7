package framework

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi"
)

// AttachedContentEndpoint attaches the volume on node-1 and answers its
// NBD endpoint.
func (e *APIEnv) AttachedContentEndpoint(t *testing.T, name string) string {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	return e.WaitVolume(t, name, name+" attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })["endpoint"].(string)
}

// VolumeNames lists the Volume objects of the test's namespace, sorted.
func (e *APIEnv) VolumeNames(t *testing.T) []string {
	t.Helper()
	list, err := e.LH.LonghornV1beta2().Volumes(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range list.Items {
		out = append(out, v.Name)
	}
	return out
}

// ServeCSI serves the CSI driver with opts against the manager of e on a
// socket of the test's own, as the sidecars and the kubelet reach it, and
// returns the socket and a stop (idempotent, also run when the test ends).
// When e's engines run in an instance manager, the Node service has the
// volumes' devices made there (as --instance-manager-dir), unless opts
// names another.
func ServeCSI(t testing.TB, e *APIEnv, opts csi.Options) (sock string, stop func()) {
	t.Helper()
	if opts.NodeID != "" && opts.InstanceManagerDir == "" {
		opts.InstanceManagerDir = e.InstanceManagerDir
	}
	return ServeCSIWith(t, client.NewClient(e.Base+"/v1", 10*time.Second), opts)
}

// ServeCSIWith is ServeCSI calling the manager with api (a client that
// sends a token of its own, say).
func ServeCSIWith(t testing.TB, api *client.Client, opts csi.Options) (sock string, stop func()) {
	t.Helper()
	d, err := csi.NewDriver(api, opts)
	if err != nil {
		t.Fatal(err)
	}
	// A unix socket's path is at most 107 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "csi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock = filepath.Join(dir, "csi.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, "unix://"+sock) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("the CSI driver stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	Eventually(t, 10*time.Second, "the CSI driver serves its socket", func() (bool, error) {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
	return sock, stop
}

var (
	VolumeSnapshotClasses  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
	VolumeSnapshots        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	VolumeSnapshotContents = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
)

// InstallSnapshotCRDs creates the snapshot CRDs once in the control plane
// (a test before may have) and waits until they are served.
func InstallSnapshotCRDs(t *testing.T, cfg *rest.Config, dir string) {
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
		Eventually(t, 30*time.Second, "CRD "+crd.Name+" Established", func() (bool, error) {
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
