package csi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

const mib = 1 << 20

// capacityAPI is the manager's API as GetCapacity reads it: the
// over-provisioning setting, node soft anti-affinity (true: several
// replicas of a volume may share a node) and the nodes.
func capacityAPI(t *testing.T, percent string, nodes ...client.Node) *controllerServer {
	return capacityAPIWith(t, percent, "true", nodes...)
}

func capacityAPIWith(t *testing.T, percent, soft string, nodes ...client.Node) *controllerServer {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/settings/storage-over-provisioning-percentage":
			_ = json.NewEncoder(w).Encode(map[string]string{"name": "storage-over-provisioning-percentage", "value": percent})
		case r.URL.Path == "/v1/settings/storage-minimal-available-percentage":
			_ = json.NewEncoder(w).Encode(map[string]string{"name": "storage-minimal-available-percentage", "value": "10"})
		case r.URL.Path == "/v1/settings/replica-soft-anti-affinity":
			_ = json.NewEncoder(w).Encode(map[string]string{"name": "replica-soft-anti-affinity", "value": soft})
		case r.URL.Path == "/v1/nodes":
			_ = json.NewEncoder(w).Encode(map[string]any{"data": nodes})
		case strings.HasPrefix(r.URL.Path, "/v1/nodes/"):
			for _, n := range nodes {
				if n.Name == strings.TrimPrefix(r.URL.Path, "/v1/nodes/") {
					_ = json.NewEncoder(w).Encode(n)
					return
				}
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"code":"NotFound","message":"node not found"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	d, err := NewDriver(client.NewClient(srv.URL+"/v1", time.Second), Options{Controller: true})
	if err != nil {
		t.Fatal(err)
	}
	return &controllerServer{d: d}
}

var (
	isTrue  = map[string]client.Condition{"Ready": {Status: "True"}}
	isFalse = map[string]client.Condition{"Ready": {Status: "False"}}
)

// disk is a ready disk of max bytes, reserved and scheduled as given, half
// of it free.
func disk(uuid string, max, reserved, scheduled int64) client.NodeDisk {
	return client.NodeDisk{DiskUUID: uuid, StorageMaximum: max, StorageReserved: reserved, StorageScheduled: scheduled, StorageAvailable: max / 2,
		Conditions: isTrue, AllowScheduling: true}
}

func readyNode(name string, disks ...client.NodeDisk) client.Node {
	n := client.Node{Name: name, Conditions: isTrue, Disks: map[string]client.NodeDisk{}, AllowScheduling: true}
	for _, d := range disks {
		n.Disks["disk-"+d.DiskUUID] = d
	}
	return n
}

func on(node string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{nodeTopologyKey: node}}
}

func TestGetCapacity(t *testing.T) {
	notReadyDisk := disk("d", 1000*mib, 0, 0)
	notReadyDisk.Conditions = isFalse
	stoppedNode := readyNode("node-1", disk("d", 1000*mib, 0, 0))
	stoppedNode.Conditions = isFalse
	closedNode := readyNode("node-1", disk("d", 1000*mib, 0, 0))
	closedNode.AllowScheduling = false
	closedDisk, fullDisk, pressedDisk := disk("d", 1000*mib, 0, 0), disk("d", 1000*mib, 0, 0), disk("d", 1000*mib, 0, 0)
	closedDisk.AllowScheduling = false
	fullDisk.StorageAvailable = 100 * mib
	pressedDisk.Conditions = map[string]client.Condition{"Ready": {Status: "True"}, "Schedulable": {Status: "False"}}
	for _, tc := range []struct {
		name              string
		percent           string
		nodes             []client.Node
		params            map[string]string
		topology          *csi.Topology
		available, volume int64
	}{
		{"a disk's size less what its replicas hold, for one replica", "100",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 0, 300*mib))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 700 * mib, 700 * mib},
		{"a class of two replicas takes half, rounded down to 2 MiB", "100",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 0, 298*mib))}, map[string]string{"numberOfReplicas": "2"}, on("node-1"), 350 * mib, 350 * mib},
		{"no numberOfReplicas is the API's three", "100",
			[]client.Node{readyNode("node-1", disk("d", 900*mib, 0, 0))}, map[string]string{}, on("node-1"), 300 * mib, 300 * mib},
		{"reserved storage is not room", "100",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 400*mib, 100*mib))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 500 * mib, 500 * mib},
		{"over-provisioning of 200 doubles the room, not the reserved storage", "200",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 500*mib, 200*mib))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 800 * mib, 800 * mib},
		{"room less than the smallest volume is none", "100",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 0, 991*mib))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"more held than the room (over-provisioning lowered) is none", "50",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 0, 900*mib))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"an xfs class needs room for 300 MiB", "100",
			[]client.Node{readyNode("node-1", disk("d", 299*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1", "fsType": "xfs"}, on("node-1"), 0, 0},
		{"the same room is enough for ext4", "100",
			[]client.Node{readyNode("node-1", disk("d", 299*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1", "fsType": "ext4"}, on("node-1"), 298 * mib, 298 * mib},
		{"a volume goes to one disk: the largest is one disk's, the sum all of them", "100",
			[]client.Node{readyNode("node-1", disk("a", 100*mib, 0, 0), disk("b", 300*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 400 * mib, 300 * mib},
		{"a disk not ready is none", "100",
			[]client.Node{readyNode("node-1", notReadyDisk, disk("e", 22*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 20 * mib, 20 * mib},
		{"a disk never probed is none", "100",
			[]client.Node{readyNode("node-1", client.NodeDisk{Conditions: isTrue})}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a node whose manager is not Ready is none", "100",
			[]client.Node{stoppedNode}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a node that does not allow scheduling is none", "100",
			[]client.Node{closedNode}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a disk that does not allow scheduling is none", "100",
			[]client.Node{readyNode("node-1", closedDisk)}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a disk at storage-minimal-available-percentage free is none", "100",
			[]client.Node{readyNode("node-1", fullDisk)}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a disk not schedulable is none", "100",
			[]client.Node{readyNode("node-1", pressedDisk)}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 0, 0},
		{"a node no manager runs on is none", "100",
			[]client.Node{readyNode("node-1", disk("d", 1000*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1"}, on("worker-9"), 0, 0},
		{"only the topology's node counts", "100",
			[]client.Node{readyNode("node-1", disk("a", 100*mib, 0, 0)), readyNode("node-2", disk("b", 300*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1"}, on("node-1"), 100 * mib, 100 * mib},
		{"no topology is every node", "100",
			[]client.Node{readyNode("node-1", disk("a", 100*mib, 0, 0)), readyNode("node-2", disk("b", 300*mib, 0, 0))}, map[string]string{"numberOfReplicas": "1"}, nil, 400 * mib, 300 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := capacityAPI(t, tc.percent, tc.nodes...).GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: tc.params, AccessibleTopology: tc.topology})
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetAvailableCapacity() != tc.available || resp.GetMaximumVolumeSize() == nil || resp.GetMaximumVolumeSize().GetValue() != tc.volume {
				t.Errorf("available %d, largest volume %v; want %d and %d", resp.GetAvailableCapacity(), resp.GetMaximumVolumeSize(), tc.available, tc.volume)
			}
		})
	}
}

// Under hard node anti-affinity a node holds one replica of a volume: its
// room is not divided by the class's replicas; a class's own
// replicaSoftAntiAffinity overrides the setting.
func TestGetCapacityUnderHardAntiAffinity(t *testing.T) {
	node := readyNode("node-1", disk("d", 900*mib, 0, 0))
	for _, tc := range []struct {
		soft   string
		params map[string]string
		want   int64
	}{
		{"false", map[string]string{"numberOfReplicas": "3"}, 900 * mib},
		{"true", map[string]string{"numberOfReplicas": "3"}, 300 * mib},
		{"true", map[string]string{"numberOfReplicas": "3", "replicaSoftAntiAffinity": "disabled"}, 900 * mib},
		{"false", map[string]string{"numberOfReplicas": "3", "replicaSoftAntiAffinity": "enabled"}, 300 * mib},
	} {
		resp, err := capacityAPIWith(t, "100", tc.soft, node).GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: tc.params, AccessibleTopology: on("node-1")})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetMaximumVolumeSize().GetValue(); got != tc.want {
			t.Errorf("setting %s, parameters %v: largest volume %d, want %d", tc.soft, tc.params, got, tc.want)
		}
	}
}

func TestGetCapacityRefusals(t *testing.T) {
	s := capacityAPI(t, "100", readyNode("node-1", disk("d", 1000*mib, 0, 0)))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  *csi.GetCapacityRequest
		says string
	}{
		{"a topology without the driver's key", &csi.GetCapacityRequest{AccessibleTopology: &csi.Topology{Segments: map[string]string{"topology.kubernetes.io/zone": "a"}}}, nodeTopologyKey},
		{"a parameter the driver cannot honour", &csi.GetCapacityRequest{Parameters: map[string]string{"numberOfReplicas": "30"}, AccessibleTopology: on("node-1")}, "numberOfReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.GetCapacity(ctx, tc.req)
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.says) {
				t.Fatalf("GetCapacity: %v; want InvalidArgument naming %q", err, tc.says)
			}
		})
	}
	// A capability no volume has (many nodes) has no room anywhere.
	resp, err := s.GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: on("node-1"), VolumeCapabilities: []*csi.VolumeCapability{{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
	}}})
	if err != nil || resp.GetAvailableCapacity() != 0 || resp.GetMaximumVolumeSize().GetValue() != 0 {
		t.Errorf("GetCapacity of a multi-node volume: %v, %v; want no room", resp, err)
	}
	// A setting that is no percentage is the manager's fault, said.
	if _, err := capacityAPI(t, "lots", readyNode("node-1")).GetCapacity(ctx, &csi.GetCapacityRequest{AccessibleTopology: on("node-1")}); status.Code(err) != codes.Internal {
		t.Errorf("GetCapacity with the setting %q: %v, want Internal", "lots", err)
	}
}
