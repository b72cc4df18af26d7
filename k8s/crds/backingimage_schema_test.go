package crds_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
)

var sha512Hex = strings.Repeat("ab", 64)

func backingImage(name string, spec longhorn.BackingImageSpec) *longhorn.BackingImage {
	return &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
}

func TestBackingImageSchemaRefusesBadInput(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	images := client(t).LonghornV1beta2().BackingImages(ns)
	ctx := context.Background()
	download := func(url string) map[string]string { return map[string]string{"url": url} }

	cases := []struct {
		name      string
		image     *longhorn.BackingImage
		fragments []string
	}{
		{"unknown source type", backingImage("bad-source", longhorn.BackingImageSpec{SourceType: "copy"}),
			[]string{"spec.sourceType", "Unsupported value"}},
		{"missing source type", backingImage("no-source", longhorn.BackingImageSpec{}),
			[]string{"spec.sourceType"}},
		{"download without url", backingImage("no-url", longhorn.BackingImageSpec{SourceType: "download"}),
			[]string{"sourceParameters.url must be an http or https URL"}},
		{"download of a file URL", backingImage("file-url", longhorn.BackingImageSpec{SourceType: "download", SourceParameters: download("file:///etc/passwd")}),
			[]string{"sourceParameters.url must be an http or https URL"}},
		{"export without volume", backingImage("no-volume", longhorn.BackingImageSpec{SourceType: "export-from-volume",
			SourceParameters: map[string]string{"export-type": "raw"}}),
			[]string{"sourceParameters.volume-name is required"}},
		{"export to an unknown format", backingImage("vmdk", longhorn.BackingImageSpec{SourceType: "export-from-volume",
			SourceParameters: map[string]string{"volume-name": "vol", "export-type": "vmdk"}}),
			[]string{"sourceParameters.export-type must be raw or qcow2"}},
		{"checksum that is no SHA512", backingImage("short-sum", longhorn.BackingImageSpec{SourceType: "upload", Checksum: "abc"}),
			[]string{"spec.checksum", "should match"}},
		{"upper-case checksum", backingImage("upper-sum", longhorn.BackingImageSpec{SourceType: "upload", Checksum: strings.ToUpper(sha512Hex)}),
			[]string{"spec.checksum", "should match"}},
		{"zero copies", backingImage("zero-copies", longhorn.BackingImageSpec{SourceType: "upload", MinNumberOfCopies: -1}),
			[]string{"spec.minNumberOfCopies", "greater than or equal to 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := images.Create(ctx, c.image, metav1.CreateOptions{})
			wantRefused(t, err, c.fragments...)
		})
	}
}

func TestBackingImageSourceAndChecksumAreImmutable(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	images := client(t).LonghornV1beta2().BackingImages(ns)
	ctx := context.Background()

	created, err := images.Create(ctx, backingImage("ubuntu", longhorn.BackingImageSpec{
		SourceType: "download", SourceParameters: map[string]string{"url": "https://example.com/ubuntu.qcow2"},
		Checksum: sha512Hex,
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.MinNumberOfCopies != 1 {
		t.Errorf("minNumberOfCopies defaulted to %d, want 1", created.Spec.MinNumberOfCopies)
	}
	change := func(name string, mutate func(*longhorn.BackingImage), fragments ...string) {
		t.Run(name, func(t *testing.T) {
			bi := created.DeepCopy()
			mutate(bi)
			_, err := images.Update(ctx, bi, metav1.UpdateOptions{})
			wantRefused(t, err, fragments...)
		})
	}
	change("source type", func(bi *longhorn.BackingImage) {
		bi.Spec.SourceType = "upload"
		bi.Spec.SourceParameters = nil
	}, "sourceType is immutable")
	change("url", func(bi *longhorn.BackingImage) {
		bi.Spec.SourceParameters["url"] = "https://example.com/other.qcow2"
	}, "sourceParameters is immutable")
	change("checksum", func(bi *longhorn.BackingImage) { bi.Spec.Checksum = strings.Repeat("cd", 64) }, "checksum is immutable")
	change("checksum dropped", func(bi *longhorn.BackingImage) { bi.Spec.Checksum = "" }, "checksum is immutable")

	// What the controllers change is free to change.
	bi := created.DeepCopy()
	bi.Spec.Disks = map[string]string{"disk-uuid-1": ""}
	bi.Spec.MinNumberOfCopies = 2
	if _, err := images.Update(ctx, bi, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing disks and minNumberOfCopies: %v", err)
	}

	// An upload without a checksum cannot gain one later.
	upload, err := images.Create(ctx, backingImage("uploaded", longhorn.BackingImageSpec{SourceType: "upload"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upload.Spec.Checksum = sha512Hex
	_, err = images.Update(ctx, upload, metav1.UpdateOptions{})
	wantRefused(t, err, "checksum is immutable")

	// The status takes every state of the list and no other.
	upload, err = images.Get(ctx, "uploaded", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	upload.Status.UUID = "0123abcd"
	upload.Status.DiskFileStatusMap = map[string]*longhorn.BackingImageDiskFileStatus{
		"d1": {State: longhorn.BackingImageStateReadyForTransfer, Progress: 100},
	}
	if upload, err = images.UpdateStatus(ctx, upload, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("status with a ready-for-transfer file: %v", err)
	}
	upload.Status.DiskFileStatusMap["d1"].State = "done"
	_, err = images.UpdateStatus(ctx, upload, metav1.UpdateOptions{})
	wantRefused(t, err, "status.diskFileStatusMap.d1.state", "Unsupported value")
}

func TestBackingImageDataSourceAndManagerSchemas(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	lh := client(t).LonghornV1beta2()
	ctx := context.Background()

	_, err := lh.BackingImageDataSources(ns).Create(ctx, &longhorn.BackingImageDataSource{
		ObjectMeta: metav1.ObjectMeta{Name: "no-disk"},
		Spec:       longhorn.BackingImageDataSourceSpec{UUID: "u1", NodeID: "n1", DiskPath: "/d", SourceType: "upload"},
	}, metav1.CreateOptions{})
	wantRefused(t, err, "spec.diskUUID")

	ds, err := lh.BackingImageDataSources(ns).Create(ctx, &longhorn.BackingImageDataSource{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu"},
		Spec: longhorn.BackingImageDataSourceSpec{UUID: "u1", NodeID: "n1", DiskUUID: "d1", DiskPath: "/d",
			SourceType: "download", Parameters: map[string]string{"url": "https://example.com/a"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := ds.DeepCopy()
	moved.Spec.UUID = "u2"
	_, err = lh.BackingImageDataSources(ns).Update(ctx, moved, metav1.UpdateOptions{})
	wantRefused(t, err, "uuid is immutable")
	moved = ds.DeepCopy()
	moved.Spec.Parameters["url"] = "https://example.com/b"
	_, err = lh.BackingImageDataSources(ns).Update(ctx, moved, metav1.UpdateOptions{})
	wantRefused(t, err, "parameters is immutable")
	ds.Spec.FileTransferred = true
	if _, err := lh.BackingImageDataSources(ns).Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("marking the file transferred: %v", err)
	}

	bim, err := lh.BackingImageManagers(ns).Create(ctx, &longhorn.BackingImageManager{
		ObjectMeta: metav1.ObjectMeta{Name: "bim-d1"},
		Spec: longhorn.BackingImageManagerSpec{Image: "longhorn-manager:v1", NodeID: "n1", DiskUUID: "d1", DiskPath: "/d",
			BackingImages: map[string]string{"ubuntu": "u1"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for field, mutate := range map[string]func(*longhorn.BackingImageManager){
		"diskUUID": func(m *longhorn.BackingImageManager) { m.Spec.DiskUUID = "d2" },
		"diskPath": func(m *longhorn.BackingImageManager) { m.Spec.DiskPath = "/e" },
		"nodeID":   func(m *longhorn.BackingImageManager) { m.Spec.NodeID = "n2" },
		"image":    func(m *longhorn.BackingImageManager) { m.Spec.Image = "longhorn-manager:v2" },
	} {
		m := bim.DeepCopy()
		mutate(m)
		_, err := lh.BackingImageManagers(ns).Update(ctx, m, metav1.UpdateOptions{})
		wantRefused(t, err, field+" is immutable")
	}
	bim.Spec.BackingImages["debian"] = "u9"
	if _, err := lh.BackingImageManagers(ns).Update(ctx, bim, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("adding a backing image to a manager: %v", err)
	}
	_, err = lh.BackingImageManagers(ns).Create(ctx, &longhorn.BackingImageManager{
		ObjectMeta: metav1.ObjectMeta{Name: "no-node"},
		Spec:       longhorn.BackingImageManagerSpec{DiskUUID: "d1", DiskPath: "/d"},
	}, metav1.CreateOptions{})
	wantRefused(t, err, "spec.nodeID")
}

func TestKubectlGetShowsBackingImageColumns(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	if _, err := client(t).LonghornV1beta2().BackingImages(ns).Create(context.Background(), backingImage("cirros", longhorn.BackingImageSpec{
		SourceType: "download", SourceParameters: map[string]string{"url": "http://127.0.0.1:1/cirros.img"},
	}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	table := cluster.Kubectl(t, "", "-n", ns, "get", "lhbi")
	for _, col := range []string{"UUID", "SOURCETYPE", "SIZE", "AGE", "cirros", "download"} {
		if !strings.Contains(table, col) {
			t.Errorf("kubectl get lhbi lacks %q:\n%s", col, table)
		}
	}
	byCategory := cluster.Kubectl(t, "", "-n", ns, "get", "longhorn")
	if !strings.Contains(byCategory, "backingimage.longhorn.io/cirros") {
		t.Errorf("kubectl get longhorn does not list the backing image:\n%s", byCategory)
	}
}
