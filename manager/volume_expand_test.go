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

// TestExpandVolume: a volume grows to the size asked for, rounded up to
// 2 MiB; the same size again changes nothing; a smaller size, one the
// disk holding its replicas has no room for (its own replicas not
// counted) and an unknown volume are refused, naming size, and spec.size
// is left as it was.
func TestExpandVolume(t *testing.T) {
	m, lh, ns := newManager(t)
	ctx := context.Background()
	const gi, mi = int64(1) << 30, int64(1) << 20
	node, err := lh.LonghornV1beta2().Nodes(ns).Create(ctx, &longhorn.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Spec: longhorn.NodeSpec{Disks: map[string]longhorn.DiskSpec{"disk-1": {Path: "/disks/1"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.DiskStatus = map[string]*longhorn.DiskStatus{"disk-1": {DiskUUID: "d-1", StorageMaximum: 10 * gi,
		Conditions: []longhorn.Condition{{Type: longhorn.ConditionTypeReady, Status: longhorn.ConditionStatusTrue}}}}
	if _, err := lh.LonghornV1beta2().Nodes(ns).UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v, err := m.CreateVolume(ctx, "grow", longhorn.VolumeSpec{Size: 2 * gi, NumberOfReplicas: 2}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Its two replicas hold 4 GiB of the disk's 10.
	for _, name := range []string{"grow-r-0", "grow-r-1"} {
		if _, err := lh.LonghornV1beta2().Replicas(ns).Create(ctx, &longhorn.Replica{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{types.LabelVolume: "grow"}},
			Spec: longhorn.ReplicaSpec{InstanceSpec: longhorn.InstanceSpec{VolumeName: "grow", VolumeSize: 2 * gi, NodeID: "node-1"}, DiskID: "d-1"}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCached(t, "node, volume and replicas cached", func() bool {
		replicas, err := m.ds.ListVolumeReplicasRO("grow")
		n, nerr := m.ds.GetNodeRO("node-1")
		_, verr := m.ds.GetVolumeRO("grow")
		return err == nil && nerr == nil && verr == nil && len(replicas) == 2 && n.Status.DiskStatus["disk-1"] != nil
	})

	grown, err := m.ExpandVolume(ctx, "grow", 3*gi+1)
	if err != nil {
		t.Fatal(err)
	}
	if grown.Spec.Size != 3*gi+2*mi {
		t.Fatalf("grown to %d, want %d (rounded up to 2 MiB)", grown.Spec.Size, 3*gi+2*mi)
	}
	same, err := m.ExpandVolume(ctx, "grow", 3*gi+2*mi)
	if err != nil || same.ResourceVersion != grown.ResourceVersion {
		t.Fatalf("the same size again: %v, written again %v", err, same.ResourceVersion != grown.ResourceVersion)
	}
	for _, tc := range []struct {
		name string
		size int64
		want error
		says []string
	}{
		{"smaller", 2 * gi, ErrInvalidInput, []string{"size", "never shrinks"}},
		// 2 replicas of 6 GiB: 12 GiB, more than the disk's 10 even with
		// the volume's own 4 GiB not counted.
		{"past the disk", 6 * gi, ErrNoCapacity, []string{"size", "the disk that holds the volume's replicas"}},
		{"zero", 0, ErrInvalidInput, []string{"size"}},
	} {
		if _, err := m.ExpandVolume(ctx, "grow", tc.size); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		} else {
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: %q does not say %q", tc.name, err, s)
				}
			}
		}
	}
	// 2 replicas of 4 GiB fit: the volume's own replicas are not counted.
	if _, err := m.ExpandVolume(ctx, "grow", 4*gi); err != nil {
		t.Fatalf("growing within the disk: %v", err)
	}
	if _, err := m.ExpandVolume(ctx, "nope", 5*gi); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown volume: %v, want ErrNotFound", err)
	}
	got, err := lh.LonghornV1beta2().Volumes(ns).Get(ctx, "grow", metav1.GetOptions{})
	if err != nil || got.Spec.Size != 4*gi || v.Spec.Size != 2*gi {
		t.Fatalf("spec.size %d (%v), want 4 GiB", got.Spec.Size, err)
	}
}
