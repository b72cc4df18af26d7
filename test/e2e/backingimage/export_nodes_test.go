//go:build e2e

package backingimage

import (
	"context"
	"crypto/sha512"
	"encoding/hex"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestBackingImageExportMovesToTheEnginesNode: an export-from-volume
// image whose disks are all on another node than the volume's engine
// does not stay failed ("an export runs on the engine's node"): its data
// source moves to a disk of the engine's node (added to spec.disks, with
// an event), exports there, and the disk the user named gets its copy
// from that one.
func TestBackingImageExportMovesToTheEnginesNode(t *testing.T) {
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	lh := framework.LHClient(t, cluster.Config)
	ctx := context.Background()

	// The volume lives on node-2, which is the only node while it is
	// created and attached, so its replica is on node-2's disk.
	d2 := framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-2", t.TempDir(), framework.WithTestServers)
	e2 := &framework.APIEnv{ManagerEnv: &framework.ManagerEnv{Cluster: cluster, NS: ns, Kube: kube, LH: lh}, Base: "http://" + d2.APIAddress}
	e2.Call(t, "POST", "/v1/volumes", `{"name":"src","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e2.Call(t, "POST", "/v1/volumes/src?action=attach", `{"hostId":"node-2"}`).Expect(t, 200)
	v := e2.WaitVolumeFor(t, 120*time.Second, "src", "src attached on node-2", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	endpoint := v["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0x6b 0 2M", "flush")
	sum := sha512.Sum512(framework.DeviceContent(t, endpoint))

	framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", t.TempDir(), framework.WithTestServers)
	diskOf := func(node string) string {
		var uuid string
		framework.Eventually(t, 60*time.Second, node+" has a disk with a UUID", func() (bool, error) {
			n, err := lh.LonghornV1beta2().Nodes(ns).Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			for _, st := range n.Status.DiskStatus {
				uuid = st.DiskUUID
			}
			return uuid != "", nil
		})
		return uuid
	}
	disk1, disk2 := diskOf("node-1"), diskOf("node-2")

	// The image names node-1's disk only.
	if _, err := lh.LonghornV1beta2().BackingImages(ns).Create(ctx, &longhorn.BackingImage{
		ObjectMeta: metav1.ObjectMeta{Name: "from-src"},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeExportFromVolume,
			SourceParameters: map[string]string{longhorn.DataSourceParameterVolumeName: "src", longhorn.DataSourceParameterExportType: longhorn.ExportTypeRaw},
			Disks:            map[string]string{disk1: ""}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var bi *longhorn.BackingImage
	framework.Eventually(t, 180*time.Second, "the image ready on both disks, exported on node-2", func() (bool, error) {
		var err error
		bi, err = lh.LonghornV1beta2().BackingImages(ns).Get(ctx, "from-src", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range []string{disk1, disk2} {
			if f := bi.Status.DiskFileStatusMap[d]; f == nil || f.State != longhorn.BackingImageStateReady {
				return false, nil
			}
		}
		return true, nil
	})
	if _, ok := bi.Spec.Disks[disk2]; !ok {
		t.Fatalf("spec.disks = %v: node-2's disk %s was not added", bi.Spec.Disks, disk2)
	}
	if want := hex.EncodeToString(sum[:]); bi.Status.Checksum != want {
		t.Fatalf("the export's checksum is %s, want the volume's %s", bi.Status.Checksum, want)
	}
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=from-src,reason=ExportMoved"})
	if err != nil || len(events.Items) == 0 {
		t.Fatalf("no ExportMoved event for the image (%v)", err)
	}
	t.Logf("event: %s", events.Items[0].Message)
}
