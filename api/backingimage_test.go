package api

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cadence-storage/longhorn-manager/internal/testtime"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

const testSum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func (s *testServer) do(t *testing.T, method, path, body string, header ...string) (int, map[string]any, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" || method == "POST" || method == "PUT" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.handler.ServeHTTP(rec, req)
	var out map[string]any
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s %s answered non-JSON %q", method, path, rec.Body.String())
		}
	}
	return rec.Code, out, rec.Body.String()
}

// eventually polls cond until it holds: the handlers read the informer
// cache, which follows the fake clientset a moment later.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testtime.Scale(5 * time.Second))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// backingImageObjects are a node with disks disk-a and disk-b, and an
// image "base" ready on both, whose file on disk-a replica vol-r-1 of
// volume vol uses.
func backingImageObjects() []runtime.Object {
	node := &longhorn.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: testNamespace},
		Spec:       longhorn.NodeSpec{Disks: map[string]longhorn.DiskSpec{"one": {Path: "/d1"}, "two": {Path: "/d2"}}},
		Status: longhorn.NodeStatus{DiskStatus: map[string]*longhorn.DiskStatus{
			"one": {DiskUUID: "disk-a"}, "two": {DiskUUID: "disk-b"},
		}},
	}
	base := &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "base", Namespace: testNamespace},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeDownload,
			SourceParameters: map[string]string{"url": "http://images.example/base.raw"}, MinNumberOfCopies: 1,
			Disks: map[string]string{"disk-a": "", "disk-b": ""}},
		Status: longhorn.BackingImageStatus{UUID: "u1", Size: 4096, Checksum: testSum, DiskFileStatusMap: map[string]*longhorn.BackingImageDiskFileStatus{
			"disk-a": {State: longhorn.BackingImageStateReady, Progress: 100}, "disk-b": {State: longhorn.BackingImageStateReady, Progress: 100},
		}},
	}
	vol := &longhorn.Volume{ObjectMeta: metav1.ObjectMeta{Name: "vol", Namespace: testNamespace}, Spec: longhorn.VolumeSpec{BackingImage: "base"}}
	replica := &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: "vol-r-1", Namespace: testNamespace},
		Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "vol"}, DiskID: "disk-a", BackingImage: "base"}}
	upload := &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: testNamespace},
		Spec:       longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeUpload, Disks: map[string]string{"disk-a": ""}},
		Status:     longhorn.BackingImageStatus{UUID: "u2"},
	}
	return []runtime.Object{node, base, vol, replica, upload}
}

func TestBackingImageCreateGetListAndConflict(t *testing.T) {
	s := newTestServer(t, backingImageObjects()...)
	code, body, raw := s.do(t, "POST", "/v1/backingimages",
		`{"name":"cirros","sourceType":"download","parameters":{"url":"https://images.example/cirros.img"},"expectedChecksum":"`+testSum+`","disks":["disk-b"],"minNumberOfCopies":2}`)
	if code != 200 || body["type"] != "backingImage" || body["id"] != "cirros" || body["expectedChecksum"] != testSum || body["minNumberOfCopies"] != 2.0 {
		t.Fatalf("create: %d %s", code, raw)
	}
	if actions := body["actions"].(map[string]any); actions["backingImageCleanup"] == nil || actions["upload"] != nil {
		t.Fatalf("a download image offers %v", actions)
	}
	bi, err := s.lh.LonghornV1beta2().BackingImages(testNamespace).Get(t.Context(), "cirros", metav1.GetOptions{})
	if err != nil || bi.Spec.Checksum != testSum || len(bi.Spec.Disks) != 1 || bi.Spec.MinNumberOfCopies != 2 {
		t.Fatalf("stored spec %+v, %v", bi.Spec, err)
	}
	// A list is the cache's: cirros is in it once the cache has it.
	var list map[string]any
	eventually(t, "cirros in the cache", func() bool {
		_, list, _ = s.do(t, "GET", "/v1/backingimages", "")
		return len(list["data"].([]any)) == 3
	})
	data := list["data"].([]any)
	if len(data) != 3 || data[0].(map[string]any)["name"] != "base" || data[1].(map[string]any)["name"] != "cirros" {
		t.Fatalf("list %v", list)
	}
	b := data[0].(map[string]any)
	if b["uuid"] != "u1" || b["currentChecksum"] != testSum || b["size"] != 4096.0 ||
		b["diskFileStatusMap"].(map[string]any)["disk-a"].(map[string]any)["state"] != "ready" {
		t.Fatalf("base as listed: %v", b)
	}
	up := data[2].(map[string]any)
	if up["actions"].(map[string]any)["upload"] == nil {
		t.Fatalf("an upload image waiting for its file offers no upload: %v", up["actions"])
	}

	code, _, raw = s.do(t, "POST", "/v1/backingimages", `{"name":"cirros","sourceType":"upload"}`)
	if code != 409 || !strings.Contains(raw, `name: backing image \"cirros\" already exists`) {
		t.Fatalf("duplicate: %d %s", code, raw)
	}
	if code, _, _ := s.do(t, "GET", "/v1/backingimages/nothing", ""); code != 404 {
		t.Fatalf("missing image: %d", code)
	}
}

func TestBackingImageCreateRefusesBadInputNamingTheField(t *testing.T) {
	s := newTestServer(t, backingImageObjects()...)
	long := strings.Repeat("a", 191)
	for _, tc := range []struct{ body, want string }{
		{`{"sourceType":"upload"}`, "name: required"},
		{`{"name":"Bad_Name","sourceType":"upload"}`, `name: \"Bad_Name\" must be a lower-case DNS subdomain`},
		{`{"name":"` + long + `","sourceType":"upload"}`, "is longer than 190 characters"},
		{`{"name":"x"}`, "sourceType: required"},
		{`{"name":"x","sourceType":"copy"}`, `sourceType: \"copy\" must be one of download, upload, export-from-volume`},
		{`{"name":"x","sourceType":"download"}`, "parameters.url: required for sourceType download"},
		{`{"name":"x","sourceType":"download","parameters":{"url":"ftp://host/x"}}`, `parameters.url: \"ftp://host/x\" must be an http or https URL`},
		{`{"name":"x","sourceType":"download","parameters":{"url":"http://"}}`, "must be an http or https URL with a host"},
		{`{"name":"x","sourceType":"download","parameters":{"url":"http://h/x","extra":"1"}}`, "parameters.extra: unknown for sourceType download, which takes url"},
		{`{"name":"x","sourceType":"upload","parameters":{"url":"http://h/x"}}`, "parameters.url: sourceType upload takes no parameters"},
		{`{"name":"x","sourceType":"export-from-volume","parameters":{"volume-name":"nope"}}`, `parameters.volume-name: volume \"nope\" does not exist`},
		{`{"name":"x","sourceType":"export-from-volume","parameters":{"volume-name":"vol","export-type":"vmdk"}}`, `parameters.export-type: \"vmdk\" must be raw or qcow2`},
		{`{"name":"x","sourceType":"upload","expectedChecksum":"ABC"}`, `expectedChecksum: \"ABC\" must be a SHA512 in lower-case hex`},
		{`{"name":"x","sourceType":"upload","expectedChecksum":"` + strings.ToUpper(testSum) + `"}`, "expectedChecksum:"},
		{`{"name":"x","sourceType":"upload","minNumberOfCopies":-1}`, "minNumberOfCopies: must be at least 1"},
		{`{"name":"x","sourceType":"upload","disks":["disk-z"]}`, "disks[0]: no node has a disk with UUID disk-z"},
		{`{"name":"x","sourceType":"upload","disks":["disk-a","disk-a"]}`, "disks[1]: disk disk-a is listed twice"},
		{`{"name":"x","sourceType":"upload","disks":[""]}`, "disks[0]: empty disk UUID"},
		{`{"name":"x","sourceType":"upload","minNumberOfCopies":"2"}`, "minNumberOfCopies: must be a whole number"},
	} {
		code, body, raw := s.do(t, "POST", "/v1/backingimages", tc.body)
		if code != 400 || body["code"] != "InvalidInput" || !strings.Contains(raw, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.body, code, raw, tc.want)
		}
	}
	list, _ := s.lh.LonghornV1beta2().BackingImages(testNamespace).List(t.Context(), metav1.ListOptions{})
	if len(list.Items) != 2 {
		t.Fatalf("refused creates wrote %d images", len(list.Items)-2)
	}
}

func TestBackingImageDeleteIsRefusedWhileAVolumeUsesIt(t *testing.T) {
	s := newTestServer(t, backingImageObjects()...)
	code, _, raw := s.do(t, "DELETE", "/v1/backingimages/base", "")
	if code != 409 || !strings.Contains(raw, "backing image base is used by volume vol (replicas vol-r-1)") {
		t.Fatalf("delete of a used image: %d %s", code, raw)
	}
	if _, err := s.lh.LonghornV1beta2().BackingImages(testNamespace).Get(t.Context(), "base", metav1.GetOptions{}); err != nil {
		t.Fatalf("the refused delete removed the image: %v", err)
	}
	if code, _, raw := s.do(t, "DELETE", "/v1/backingimages/up", ""); code != 204 {
		t.Fatalf("delete of an unused image: %d %s", code, raw)
	}
	if code, _, _ := s.do(t, "DELETE", "/v1/backingimages/nothing", ""); code != 404 {
		t.Fatalf("delete of a missing image: %d", code)
	}
}

func TestBackingImageCleanupAction(t *testing.T) {
	s := newTestServer(t, backingImageObjects()...)
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"disks":["disk-a"]}`, 409, "disk disk-a: its file is used by replica vol-r-1"},
		{`{"disks":["disk-z"]}`, 400, "disks[0]: disk disk-z holds no file of this backing image"},
		{`{"disks":[]}`, 400, "disks: name at least one disk UUID"},
		// A misspelt field is ignored, as Longhorn's API ignores unknown
		// fields; the one required field is then missing.
		{`{"disk":["disk-b"]}`, 400, "disks: name at least one disk UUID"},
	} {
		if code, _, raw := s.do(t, "POST", "/v1/backingimages/base?action=backingImageCleanup", tc.body); code != tc.code || !strings.Contains(raw, tc.want) {
			t.Errorf("%s: %d %s, want %d saying %q", tc.body, code, raw, tc.code, tc.want)
		}
	}
	code, body, raw := s.do(t, "POST", "/v1/backingimages/base?action=backingImageCleanup", `{"disks":["disk-b"]}`)
	if code != 200 || body["type"] != "backingImage" {
		t.Fatalf("cleanup of an unused disk: %d %s", code, raw)
	}
	bi, _ := s.lh.LonghornV1beta2().BackingImages(testNamespace).Get(t.Context(), "base", metav1.GetOptions{})
	if _, ok := bi.Spec.Disks["disk-b"]; ok || len(bi.Spec.Disks) != 1 {
		t.Fatalf("spec.disks after the cleanup: %v", bi.Spec.Disks)
	}
	if code, _, _ := s.do(t, "POST", "/v1/backingimages/nothing?action=backingImageCleanup", `{"disks":["disk-a"]}`); code != 404 {
		t.Fatalf("cleanup of a missing image: %d", code)
	}
	if code, _, raw := s.do(t, "POST", "/v1/backingimages/base?action=explode", `{}`); code != 400 || !strings.Contains(raw, "backingImageCleanup, upload") {
		t.Fatalf("unknown action: %d %s", code, raw)
	}
}

func multipartBody(t *testing.T, content []byte) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "image.raw")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(content)
	_ = mw.Close()
	return buf.String(), mw.FormDataContentType()
}

func TestBackingImageUploadRefusals(t *testing.T) {
	s := newTestServer(t, backingImageObjects()...)
	s.server.uploadWait = 300 * time.Millisecond
	body, ct := multipartBody(t, []byte("data"))
	for _, tc := range []struct {
		path, contentType string
		code              int
		want              string
	}{
		{"/v1/backingimages/up?action=upload", ct, 400, "size: query parameter required"},
		{"/v1/backingimages/up?action=upload&size=0", ct, 400, `size: \"0\" must be the file's size in bytes`},
		{"/v1/backingimages/up?action=upload&size=x", ct, 400, "positive whole number"},
		{"/v1/backingimages/up?action=upload&size=4", "application/json", 415, "send multipart/form-data"},
		{"/v1/backingimages/base?action=upload&size=4", ct, 400, "backing image base has sourceType download; only sourceType upload takes a file"},
		{"/v1/backingimages/nothing?action=upload&size=4", ct, 404, "nothing"},
		// No data source server comes up in the unit test: the wait is bounded.
		{"/v1/backingimages/up?action=upload&size=4", ct, 503, "the upload server of backing image up is not up after 300ms (its data source is not created yet)"},
	} {
		if code, _, raw := s.do(t, "POST", tc.path, body, "Content-Type", tc.contentType); code != tc.code || !strings.Contains(raw, tc.want) {
			t.Errorf("%s (%s): %d %s, want %d saying %q", tc.path, tc.contentType, code, raw, tc.code, tc.want)
		}
	}
}

func TestBackingImageSchemas(t *testing.T) {
	s := newTestServer(t)
	_, sc, raw := s.do(t, "GET", "/v1/schemas/backingImage", "")
	actions := sc["resourceActions"].(map[string]any)
	if actions["backingImageCleanup"].(map[string]any)["input"] != "backingImageCleanupInput" || actions["upload"] == nil {
		t.Fatalf("backingImage schema: %s", raw)
	}
	for _, id := range []string{"backingImageCleanupInput", "backingImageDiskFileStatus"} {
		if code, _, _ := s.do(t, "GET", "/v1/schemas/"+id, ""); code != 200 {
			t.Errorf("no schema %s", id)
		}
	}
	if _, root, _ := s.do(t, "GET", "/v1", ""); root["links"].(map[string]any)["backingimages"] == nil {
		t.Errorf("the root does not link backingimages: %v", root)
	}
	_ = http.StatusOK
}
