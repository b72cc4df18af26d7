//go:build e2e

package backingimage

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	bimanager "github.com/cadence-storage/longhorn-manager/backingimage/manager"
	bipb "github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/controller/volume"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// replicaBacking reads the backing file a replica's metadata names.
func replicaBacking(t *testing.T, r longhorn.Replica) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(r.Spec.DiskPath, "replicas", r.Spec.DataDirectoryName, "volume.meta"))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Backing *struct {
			Path string `json:"path"`
		} `json:"backing"`
	}
	if err := json.Unmarshal(data, &meta); err != nil || meta.Backing == nil {
		t.Fatalf("replica %s: no backing file in its metadata (%v): %s", r.Name, err, data)
	}
	return meta.Backing.Path
}

// TestVolumeOnABackingImage: a volume created from an image that is on
// another disk waits for the file on its replicas' disks (synced there by
// the managers; disk anti-affinity puts its two replicas on the node's two
// disks), then reads the image's bytes, each replica on its disk's one
// file; writes never reach the file; a backup records the image, and
// restores only onto a volume on the same image.
func TestVolumeOnABackingImage(t *testing.T) {
	e, disks, replicaDisk, otherDisk := framework.TwoDiskAPIEnv(t)
	content, sum, url := framework.ServeImage(t, 3<<20+1234)
	createDownloadImage(t, e.LH, e.NS, "base", url, sum, map[string]string{otherDisk: disks[otherDisk]})

	e.Call(t, "POST", "/v1/volumes", `{"name":"vm","size":"8Mi","numberOfReplicas":2,"backingImage":"base"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/vm?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v := e.WaitVolumeFor(t, 120*time.Second, "vm", "the volume attached on its backing image", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	bi, err := e.LH.LonghornV1beta2().BackingImages(e.NS).Get(context.Background(), "base", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := bi.Spec.Disks[replicaDisk]; !ok {
		t.Fatalf("the replicas' disk %s was not added to the image's disks %v", replicaDisk, bi.Spec.Disks)
	}
	vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "vm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := conditionOf(vol.Status.Conditions, volume.ConditionTypeWaitForBackingImage); c.Status != longhorn.ConditionStatusFalse {
		t.Fatalf("an attached volume still waits for its backing image: %+v", c)
	}

	want := make([]byte, 8<<20)
	copy(want, content)
	endpoint := v["endpoint"].(string)
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read its backing image's bytes")
	}

	// Each replica sits on its disk's one file of the image, one replica
	// on each disk.
	file := filepath.Join(backingimage.FileFolder(disks[replicaDisk], "base", bi.Status.UUID), backingimage.DataFile)
	replicas, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(replicas.Items) != 2 {
		t.Fatalf("replicas: %d, %v", len(replicas.Items), err)
	}
	seen := map[string]bool{}
	for _, r := range replicas.Items {
		if r.Spec.BackingImage != "base" || (r.Spec.DiskID != replicaDisk && r.Spec.DiskID != otherDisk) || seen[r.Spec.DiskID] {
			t.Fatalf("replica %s: backingImage %q on disk %s (the other on %v)", r.Name, r.Spec.BackingImage, r.Spec.DiskID, seen)
		}
		seen[r.Spec.DiskID] = true
		own := filepath.Join(backingimage.FileFolder(disks[r.Spec.DiskID], "base", bi.Status.UUID), backingimage.DataFile)
		if got := replicaBacking(t, r); got != own {
			t.Fatalf("replica %s opens %s, want its disk's file %s", r.Name, got, own)
		}
	}
	// A pod that calls the disk's manager server itself cannot delete the
	// file the replicas start from: the server reads their records.
	refuseDeleteOfFileInUse(t, e, replicaDisk, "base", bi.Status.UUID, file)

	// Writes go to the layers, never to the shared file.
	framework.QemuIO(t, endpoint, "write -P 0xab 1M 4k", "write -z 2M 8k", "flush")
	for i := 1 << 20; i < 1<<20+4096; i++ {
		want[i] = 0xab
	}
	clear(want[2<<20 : 2<<20+8192])
	if got := framework.DeviceContent(t, endpoint); !bytes.Equal(got, want) {
		t.Fatal("the volume does not read its writes over the image")
	}
	onDisk, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha512.Sum512(onDisk); hex.EncodeToString(s[:]) != sum {
		t.Fatal("a write reached the backing image's file")
	}

	// A backup records the image; a restore needs a volume on it.
	e.Call(t, "POST", "/v1/volumes/vm?action=snapshotCreate", `{"name":"s1"}`).Expect(t, 200)
	target := "file://" + t.TempDir()
	e.SetBackupTarget(t, target)
	backup := e.Call(t, "POST", "/v1/volumes/vm?action=snapshotBackup", `{"name":"s1"}`).Expect(t, 200).Body["name"].(string)
	var url2 string
	framework.Eventually(t, 60*time.Second, "the backup completed and names the image", func() (bool, error) {
		r := e.Call(t, "POST", "/v1/backupvolumes/vm?action=backupGet", `{"name":"`+backup+`"}`)
		if r.Status != 200 || r.Body["state"] != "Completed" {
			return false, nil
		}
		url2, _ = r.Body["url"].(string)
		return r.Body["volumeBackingImageName"] == "base", nil
	})

	// Created with kubectl's path, not the API's, which may fill the image in.
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec:       longhorn.VolumeSpec{Size: 8 << 20, NumberOfReplicas: 1, FromBackup: url2},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 60*time.Second, "the restore onto a volume without the image is refused", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "plain", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c := conditionOf(vol.Status.Conditions, "Restore")
		return c.Status == longhorn.ConditionStatusFalse && strings.Contains(c.Message, "restore it into a volume with backingImage base"), nil
	})

	e.Call(t, "POST", "/v1/volumes", `{"name":"copy","size":"8Mi","numberOfReplicas":1,"backingImage":"base","fromBackup":"`+url2+`"}`).Expect(t, 200)
	framework.Eventually(t, 60*time.Second, "the restore onto the same image is done", func() (bool, error) {
		vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "copy", metav1.GetOptions{})
		return err == nil && vol.Status.RestoreInitiated && !vol.Status.RestoreRequired, err
	})
	e.Call(t, "POST", "/v1/volumes/copy?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	c := e.WaitVolumeFor(t, 60*time.Second, "copy", "the restored volume attached", func(v map[string]any) bool {
		return v["state"] == "attached" && v["endpoint"] != ""
	})
	if got := framework.DeviceContent(t, c["endpoint"].(string)); !bytes.Equal(got, want) {
		t.Fatal("the restored volume does not read what the snapshot held over the image")
	}
}

func conditionOf(conds []longhorn.Condition, condType string) longhorn.Condition {
	for _, c := range conds {
		if c.Type == condType {
			return c
		}
	}
	return longhorn.Condition{}
}

// TestVolumeWaitsForItsBackingImage: a volume whose image is missing, or
// whose file failed, stays detached with the reason in its
// WaitForBackingImage condition; it never starts on a half-made file.
func TestVolumeWaitsForItsBackingImage(t *testing.T) {
	e, disks, replicaDisk, _ := framework.TwoDiskAPIEnv(t)
	_, _, url := framework.ServeImage(t, 1<<20)
	wrong := strings.Repeat("0", 128)
	createDownloadImage(t, e.LH, e.NS, "bad", url, wrong, map[string]string{replicaDisk: disks[replicaDisk]})
	for _, vol := range []struct{ name, image, reason string }{
		{"on-bad", "bad", "is failed"},
		{"on-nothing", "nothing", "backing image nothing does not exist"},
	} {
		if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Create(context.Background(), &longhorn.Volume{
			ObjectMeta: metav1.ObjectMeta{Name: vol.name},
			Spec:       longhorn.VolumeSpec{Size: 4 << 20, NumberOfReplicas: 1, BackingImage: vol.image, NodeID: "node-1"},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, 90*time.Second, vol.name+" waits for its backing image, saying why", func() (bool, error) {
			v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), vol.name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			c := conditionOf(v.Status.Conditions, volume.ConditionTypeWaitForBackingImage)
			return c.Status == longhorn.ConditionStatusTrue && strings.Contains(c.Message, vol.reason) &&
				v.Status.State == longhorn.VolumeStateDetached, nil
		})
	}
}

// refuseDeleteOfFileInUse calls Delete on the manager server of the disk
// directly: a pod without a certificate of the cluster's CA is refused
// at the handshake, and even a Longhorn component (or one that stole a
// certificate) is refused, naming the replicas, with the file left.
func refuseDeleteOfFileInUse(t *testing.T, e *framework.APIEnv, disk, image, uuid, file string) {
	t.Helper()
	bims, err := e.LH.LonghornV1beta2().BackingImageManagers(e.NS).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addr string
	for _, bim := range bims.Items {
		if bim.Spec.DiskUUID == disk && bim.Status.IP != "" {
			addr = bim.Status.IP
		}
	}
	if addr == "" {
		t.Fatalf("no running backing image manager on disk %s", disk)
	}
	framework.RefusedOverGRPC(t, "the backing image manager", addr, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := bipb.NewBackingImageManagerClient(conn).Delete(ctx, &bipb.FileRequest{Name: image, Uuid: uuid})
		return err
	})
	client, err := bimanager.NewClient(addr, 0, framework.ClusterIdentity(t, e.Kube, e.NS))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	err = client.Delete(context.Background(), image, uuid)
	if !errors.Is(err, bimanager.ErrPrecondition) || !strings.Contains(err.Error(), "in use by") || !strings.Contains(err.Error(), "vm-") {
		t.Fatalf("a direct Delete of a file replicas use: %v, want it refused naming the replicas", err)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the refused Delete touched the file: %v", err)
	}
}
