package manager

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// TestVolumeManagerBoundsAVolumeByWhatADiskHolds: a volume's replicas all
// live on one disk of the node it attaches to, so a volume whose replicas
// together, with what the disk already holds for other replicas, exceed
// the largest ready disk (scaled by storage-over-provisioning-percentage,
// as Longhorn's scheduling does) is refused naming size and
// numberOfReplicas and the disk; a volume that fits is made.
func TestVolumeManagerBoundsAVolumeByWhatADiskHolds(t *testing.T) {
	m, lh, ns := newManager(t)
	ctx := context.Background()
	const gi = int64(1) << 30
	ready := []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}
	for _, n := range []struct {
		name  string
		max   int64
		ready bool
	}{{"node-1", 10 * gi, true}, {"node-2", 100 * gi, false}} {
		node, err := lh.LonghornV1beta2().Nodes(ns).Create(ctx, &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name},
			Spec: longhorn.NodeSpec{Disks: map[string]longhorn.DiskSpec{"disk-1": {Path: "/disks/" + n.name, StorageReserved: gi}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := &longhorn.DiskStatus{DiskUUID: "d-" + n.name, StorageMaximum: n.max, Conditions: ready}
		if !n.ready {
			st.Conditions = []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusFalse}}
		}
		node.Status.DiskStatus = map[string]*longhorn.DiskStatus{"disk-1": st}
		if _, err := lh.LonghornV1beta2().Nodes(ns).UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A replica of another volume already holds 2 GiB of node-1's disk.
	if _, err := lh.LonghornV1beta2().Replicas(ns).Create(ctx, &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: "other-r-0"},
		Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "other", VolumeSize: 2 * gi, NodeID: "node-1"}, DiskID: "d-node-1"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCached(t, "nodes and the replica cached", func() bool {
		nodes, err := m.ds.ListNodesRO()
		replicas, rerr := m.ds.ListReplicasRO()
		if err != nil || rerr != nil || len(nodes) != 2 || len(replicas) != 1 {
			return false
		}
		for _, n := range nodes {
			if n.Status.DiskStatus["disk-1"] == nil {
				return false
			}
		}
		return true
	})

	// node-1's disk holds 10 GiB - 1 GiB reserved - 2 GiB scheduled = 7 GiB.
	if _, err := m.CreateVolume(ctx, "fits", longhorn.VolumeSpec{Size: 3 * gi, NumberOfReplicas: 2}, nil, ""); err != nil {
		t.Fatalf("2 replicas of 3 GiB on a disk with 7 GiB free of replicas: %v", err)
	}
	_, err := m.CreateVolume(ctx, "too-big", longhorn.VolumeSpec{Size: 3 * gi, NumberOfReplicas: 3}, nil, "")
	if !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("3 replicas of 3 GiB: %v, want ErrInvalidInput", err)
	}
	for _, want := range []string{"size", "numberOfReplicas", "9663676416", "node-1", "storage-over-provisioning-percentage"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if _, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "too-big", metav1.GetOptions{}); err == nil {
		t.Fatal("the refused volume was made")
	}
	// No replica count (a caller other than the API, which defaults it):
	// left to the CRD's rule, never a division by zero here.
	if _, err := m.CreateVolume(ctx, "no-replicas", longhorn.VolumeSpec{Size: 3 * gi}, nil, ""); err == nil || !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("a volume with no replica count: %v, want it refused as invalid", err)
	}

	if _, err := lh.LonghornV1beta2().Settings(ns).Create(ctx, &longhorn.Setting{ObjectMeta: metav1.ObjectMeta{Name: string(types.SettingNameStorageOverProvisioningPercentage)},
		Value: "200"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCached(t, "setting cached", func() bool {
		v, err := m.ds.GetSettingValue(types.SettingNameStorageOverProvisioningPercentage)
		return err == nil && v == "200"
	})
	// With 200%: 18 GiB - 2 GiB scheduled (the volume "fits" has no
	// replica yet) = 16 GiB.
	if _, err := m.CreateVolume(ctx, "over-provisioned", longhorn.VolumeSpec{Size: 3 * gi, NumberOfReplicas: 3}, nil, ""); err != nil {
		t.Fatalf("3 replicas of 3 GiB with 200%% over-provisioning: %v", err)
	}
}
