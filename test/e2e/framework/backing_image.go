package framework

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

// MultipartUpload is what curl -F file=@image.raw sends.
func MultipartUpload(t *testing.T, content []byte) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("note", "a form field before the file"); err != nil {
		t.Fatal(err)
	}
	fw, err := mw.CreateFormFile("file", "image.raw")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), mw.FormDataContentType()
}

// UploadInTwo posts body to the upload action in two writes; between them
// it calls midway, which may wait for what the first half caused.
func (e *APIEnv) UploadInTwo(t *testing.T, name string, size int, body []byte, contentType string, midway func()) APIResponse {
	t.Helper()
	pr, pw := io.Pipe()
	go func() {
		half := len(body) / 2
		if _, err := pw.Write(body[:half]); err != nil {
			pw.CloseWithError(err)
			return
		}
		midway()
		_, err := pw.Write(body[half:])
		pw.CloseWithError(err)
	}()
	resp, err := http.Post(fmt.Sprintf("%s/v1/backingimages/%s?action=upload&size=%d", e.Base, name, size), contentType, pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return APIResponse{Status: resp.StatusCode, Raw: string(raw)}
}

// DiskFile reads the image's file status on a disk.
func (e *APIEnv) DiskFile(t *testing.T, name, disk string) longhorn.BackingImageDiskFileStatus {
	t.Helper()
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := bi.Status.DiskFileStatusMap[disk]; f != nil {
		return *f
	}
	return longhorn.BackingImageDiskFileStatus{}
}

func RandomImage(t *testing.T, size int) ([]byte, string) {
	t.Helper()
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(content)
	return content, hex.EncodeToString(sum[:])
}

// CreateExportImage creates an export-from-volume backing image with no
// disk: the controller places it on the volume's engine's node.
func (e *APIEnv) CreateExportImage(t *testing.T, name, volume, exportType string) {
	t.Helper()
	if _, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Create(context.Background(), &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeExportFromVolume, SourceParameters: map[string]string{
			longhorn.DataSourceParameterVolumeName: volume, longhorn.DataSourceParameterExportType: exportType}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// WaitImageFile waits until one disk's file of the image is in state
// (with a message containing msg) and answers the image and that disk.
func (e *APIEnv) WaitImageFile(t *testing.T, name string, state longhorn.BackingImageState, msg string) (*longhorn.BackingImage, string) {
	t.Helper()
	var bi *longhorn.BackingImage
	var disk string
	// Generous: an export of several GiB hashes every byte, and the suite
	// runs two packages at once on two cores.
	Eventually(t, 180*time.Second, "a file of "+name+" is "+string(state)+" saying "+msg, func() (bool, error) {
		var err error
		bi, err = e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for d, f := range bi.Status.DiskFileStatusMap {
			if f.State == longhorn.BackingImageStateFailed && state != longhorn.BackingImageStateFailed {
				t.Fatalf("the file of %s on disk %s failed: %s", name, d, f.Message)
			}
			if f.State == state && strings.Contains(f.Message, msg) {
				disk = d
				return true, nil
			}
		}
		return false, nil
	})
	return bi, disk
}

func (e *APIEnv) AttachVolume(t *testing.T, name string) string {
	t.Helper()
	e.Call(t, "POST", "/v1/volumes/"+name+"?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolumeFor(t, 120*time.Second, name, name+" attached", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	return v["endpoint"].(string)
}

// RestartDaemon starts the daemon of the last twoDiskNode again, with
// the options it was started with and then opts.
var RestartDaemon func(opts ...func(*app.DaemonOptions)) *RunningDaemon

// TwoDiskDaemon is the daemon the last twoDiskNode started.
var TwoDiskDaemon *RunningDaemon

// TwoDiskNode starts a daemon whose node has a second disk, and answers
// the disks' paths by UUID.
func TwoDiskNode(t *testing.T, opts ...func(*app.DaemonOptions)) (lh lhclientset.Interface, ns string, d *RunningDaemon, disks map[string]string) {
	t.Helper()
	cluster := testcluster.Get(t)
	ns = cluster.NewNamespace(t)
	InstallRBAC(t, cluster.KubeClient(t), ns)
	dataDir := t.TempDir()
	opts = append([]func(*app.DaemonOptions){WithTestServers}, opts...)
	d = StartDaemon(t, cluster.ServiceAccountConfig(ns, ServiceAccount), ns, "node-1", dataDir, opts...)
	TwoDiskDaemon = d
	RestartDaemon = func(more ...func(*app.DaemonOptions)) *RunningDaemon {
		return StartDaemon(t, cluster.ServiceAccountConfig(ns, ServiceAccount), ns, "node-1", dataDir, append(opts, more...)...)
	}
	lh = LHClient(t, cluster.Config)
	second := t.TempDir()
	err := datastore.RetryOnConflict(func() error {
		node, err := lh.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Disks["second-disk"] = longhorn.DiskSpec{Type: longhorn.DiskTypeFilesystem, Path: second, AllowScheduling: true}
		_, err = lh.LonghornV1beta2().Nodes(ns).Update(context.Background(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "both disks have a UUID", func() (bool, error) {
		node, err := lh.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		disks = map[string]string{}
		for name, st := range node.Status.DiskStatus {
			if st != nil && st.DiskUUID != "" {
				disks[st.DiskUUID] = node.Spec.Disks[name].Path
			}
		}
		return len(disks) == 2, nil
	})
	return lh, ns, d, disks
}

// WaitReady waits until the image's file is ready on every disk whose
// message contains want.
func WaitReady(t *testing.T, lh lhclientset.Interface, ns, name string, disks map[string]string, want string) *longhorn.BackingImage {
	t.Helper()
	var bi *longhorn.BackingImage
	Eventually(t, 90*time.Second, "the file of "+name+" is ready on every disk", func() (bool, error) {
		var err error
		bi, err = lh.LonghornV1beta2().BackingImages(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for disk := range disks {
			f := bi.Status.DiskFileStatusMap[disk]
			if f == nil || f.State != longhorn.BackingImageStateReady || !strings.Contains(f.Message, want) {
				return false, nil
			}
		}
		return true, nil
	})
	return bi
}

func ServeImage(t *testing.T, size int) ([]byte, string, string) {
	t.Helper()
	content := make([]byte, size)
	if _, err := rand.Read(content); err != nil {
		t.Fatal(err)
	}
	sum, url := ServeFile(t, "image.raw", content)
	return content, sum, url
}

// ServeFile serves content at /name from an HTTP server on 127.0.0.1
// that the test stops, and returns its SHA512 and URL.
func ServeFile(t *testing.T, name string, content []byte) (string, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(content))
	}))
	t.Cleanup(srv.Close)
	sum := sha512.Sum512(content)
	return hex.EncodeToString(sum[:]), srv.URL + "/" + name
}

// TwoDiskAPIEnv is twoDiskNode with the API client of its daemon, and the
// UUIDs of the disk replicas go to (the first by name) and of the other.
func TwoDiskAPIEnv(t *testing.T, opts ...func(*app.DaemonOptions)) (e *APIEnv, disks map[string]string, replicaDisk, otherDisk string) {
	t.Helper()
	lh, ns, d, disks := TwoDiskNode(t, opts...)
	cluster := testcluster.Get(t)
	e = &APIEnv{ManagerEnv: &ManagerEnv{Cluster: cluster, NS: ns, Kube: cluster.KubeClient(t), LH: lh}, Base: "http://" + d.APIAddress}
	node, err := lh.LonghornV1beta2().Nodes(ns).Get(context.Background(), "node-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, st := range node.Status.DiskStatus {
		if name == "second-disk" {
			otherDisk = st.DiskUUID
		} else {
			replicaDisk = st.DiskUUID
		}
	}
	return e, disks, replicaDisk, otherDisk
}

func (e *APIEnv) WaitVolumeFor(t *testing.T, timeout time.Duration, name, what string, cond func(v map[string]any) bool) map[string]any {
	t.Helper()
	var body map[string]any
	Eventually(t, timeout, what, func() (bool, error) {
		r := e.Call(t, "GET", "/v1/volumes/"+name, "")
		body = r.Body
		return r.Status == 200 && cond(body), nil
	})
	return body
}
