//go:build e2e

package csi

import (
	"context"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// A volume goes where the topology asks (issue: replicas went to the node
// whose manager made them first, so a WaitForFirstConsumer claim's PV
// could send its pod away from the node the scheduler chose): with two
// managers, CreateVolume's preferred topology names node-2 (as
// external-provisioner puts the selected node first) and the first
// replica is made on node-2's disk (the second on node-1's, anti-affinity
// spreading them) and the answer's topology is node-2, though the driver
// talks to node-1's API; preferring node-1 puts a volume there; a node no
// manager runs on pins nothing.
func TestCSICreateVolumeGoesWhereTheTopologyAsks(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	framework.StartDaemon(t, e.Cluster.ServiceAccountConfig(e.NS, framework.ServiceAccount), e.NS, "node-2", t.TempDir())
	framework.Eventually(t, 20*time.Second, "node-2 known to node-1's API", func() (bool, error) {
		return e.Call(t, "GET", "/v1/nodes/node-2", "").Status == 200, nil
	})
	cs := csiController(t, e)
	ctx := context.Background()
	on := func(node string) *csipb.Topology {
		return &csipb.Topology{Segments: map[string]string{"kubernetes.io/hostname": node}}
	}
	for _, node := range []string{"node-2", "node-1"} {
		req := createRequest("pvc-on-"+node, 16<<20, map[string]string{"numberOfReplicas": "2"})
		req.AccessibilityRequirements = &csipb.TopologyRequirement{
			Requisite: []*csipb.Topology{on("node-1"), on("node-2")},
			Preferred: []*csipb.Topology{on(node), on(map[string]string{"node-1": "node-2", "node-2": "node-1"}[node])},
		}
		resp, err := cs.CreateVolume(ctx, req)
		if err != nil {
			t.Fatalf("preferring %s: %v", node, err)
		}
		if got := resp.Volume.AccessibleTopology[0].Segments["kubernetes.io/hostname"]; got != node {
			t.Errorf("preferring %s, the volume is accessible on %s", node, got)
		}
		replicas, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(ctx, metav1.ListOptions{LabelSelector: "longhornvolume=pvc-on-" + node})
		if err != nil || len(replicas.Items) != 2 {
			t.Fatalf("replicas of pvc-on-%s: %v, %v", node, replicas, err)
		}
		// The first where the topology asks; the second on the other
		// node, as anti-affinity prefers even when soft.
		for _, r := range replicas.Items {
			want := node
			if r.Name != "pvc-on-"+node+"-r-0" {
				want = map[string]string{"node-1": "node-2", "node-2": "node-1"}[node]
			}
			if r.Spec.NodeID != want {
				t.Errorf("replica %s on %s, want %s", r.Name, r.Spec.NodeID, want)
			}
		}
	}
	// A node no manager runs on (a Kubernetes node whose hostname label
	// is not its name, say) pins nothing: the volume is placed on a
	// Longhorn node, whose topology the answer gives.
	req := createRequest("pvc-elsewhere", 16<<20, nil)
	req.AccessibilityRequirements = &csipb.TopologyRequirement{Preferred: []*csipb.Topology{on("node-9")}}
	resp, err := cs.CreateVolume(ctx, req)
	if err != nil {
		t.Fatalf("preferring a node no manager runs on: %v", err)
	}
	if got := resp.Volume.AccessibleTopology[0].Segments["kubernetes.io/hostname"]; got != "node-1" && got != "node-2" {
		t.Errorf("the volume is accessible on %q", got)
	}
	// The API itself refuses a node it does not know, naming the field.
	e.Call(t, "POST", "/v1/volumes", `{"name":"api-nowhere","size":"16777216","numberOfReplicas":1,"selectedNode":"node-9"}`).
		Expect(t, 400, "selectedNode", "not a Longhorn node")
}
