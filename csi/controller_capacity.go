package csi

import (
	"context"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/cadence-storage/longhorn-manager/client"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// defaultNumberOfReplicas is what the API gives a volume whose StorageClass
// names no numberOfReplicas (api/volume.go, Longhorn's default).
const defaultNumberOfReplicas = 3

// GetCapacity answers how large a volume of the request's parameters (its
// StorageClass's) the node its topology names can take, as the
// external-provisioner asks for each node to publish CSIStorageCapacity
// objects, which the kube-scheduler reads for a WaitForFirstConsumer
// claim. It is the room the manager counts (datastore.DiskRoom): each
// ready disk's size less its reserved storage, times
// storage-over-provisioning-percentage, less the replicas it holds
// (storageScheduled). Under hard node anti-affinity
// (replica-soft-anti-affinity false, or the class's
// replicaSoftAntiAffinity disabled) the node holds one replica of the
// volume, the others going to other nodes, so a disk with room R takes a
// volume of R; under soft anti-affinity all its replicas may end up on
// the node, so R divided by the class's number of replicas, which never
// promises room that is not there. Rounded down to Longhorn's 2 MiB;
// less than the smallest volume (10 MiB, 300 MiB for xfs) is none.
// maximum_volume_size is the largest any disk takes, which the scheduler
// compares with a claim's size; available_capacity the sum over the
// disks.
//
// A node no manager runs on (not a Longhorn node), or whose manager is
// not Ready, or whose disks have not reported their size or take no
// replica by the scheduler's rules, has no room: its pods' volumes are
// placed where the topology asks. Without a topology the answer is for
// every node.
func (s *controllerServer) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	replicas := params.create.NumberOfReplicas
	if replicas == 0 {
		replicas = defaultNumberOfReplicas
	}
	if caps := req.GetVolumeCapabilities(); len(caps) > 0 && checkCapabilities(caps) != nil {
		// No volume of these capabilities can be made anywhere.
		return &csi.GetCapacityResponse{MaximumVolumeSize: wrapperspb.Int64(0)}, nil
	}
	least := int64(minimalSize)
	if fsTypeOf(req.GetVolumeCapabilities(), params.fsType) == "xfs" {
		least = minimalSizeXFS
	}
	percent, err := s.percentSetting(ctx, types.SettingNameStorageOverProvisioningPercentage)
	if err != nil {
		return nil, err
	}
	minimal, err := s.percentSetting(ctx, types.SettingNameStorageMinimalAvailablePercentage)
	if err != nil {
		return nil, err
	}

	if replicas > 1 {
		soft, err := s.nodeSoftAntiAffinity(ctx, params)
		if err != nil {
			return nil, err
		}
		if !soft {
			replicas = 1
		}
	}

	var nodes []client.Node
	if topology := req.GetAccessibleTopology(); topology != nil {
		name := topology.GetSegments()[nodeTopologyKey]
		if name == "" {
			return nil, status.Errorf(codes.InvalidArgument, "accessible_topology: %v names no %s, the driver's only topology key", topology.GetSegments(), nodeTopologyKey)
		}
		n, err := s.d.api.Node(ctx, name)
		switch {
		case client.IsNotFound(err):
		case err != nil:
			return nil, apiStatus(err, "read node "+name)
		default:
			nodes = append(nodes, *n)
		}
	} else if nodes, err = s.d.api.Nodes(ctx); err != nil {
		return nil, apiStatus(err, "list nodes")
	}

	var available, largest int64
	for i := range nodes {
		for _, size := range nodeVolumeRoom(&nodes[i], percent, minimal, replicas, least) {
			available += size
			largest = max(largest, size)
		}
	}
	return &csi.GetCapacityResponse{AvailableCapacity: available, MaximumVolumeSize: wrapperspb.Int64(largest)}, nil
}

// nodeSoftAntiAffinity says whether a volume of the class's parameters
// may have several replicas on one node: its replicaSoftAntiAffinity, or
// else the setting.
func (s *controllerServer) nodeSoftAntiAffinity(ctx context.Context, params *volumeParams) (bool, error) {
	switch longhorn.SoftAntiAffinity(params.create.ReplicaSoftAntiAffinity) {
	case longhorn.SoftAntiAffinityEnabled:
		return true, nil
	case longhorn.SoftAntiAffinityDisabled:
		return false, nil
	}
	value, err := s.d.api.Setting(ctx, string(types.SettingNameReplicaSoftAntiAffinity))
	if err != nil {
		return false, apiStatus(err, "read setting "+string(types.SettingNameReplicaSoftAntiAffinity))
	}
	soft, err := strconv.ParseBool(value)
	if err != nil {
		return false, status.Errorf(codes.Internal, "setting %s: %q is not a bool", types.SettingNameReplicaSoftAntiAffinity, value)
	}
	return soft, nil
}

// percentSetting reads a setting of a percentage.
func (s *controllerServer) percentSetting(ctx context.Context, name types.SettingName) (int, error) {
	value, err := s.d.api.Setting(ctx, string(name))
	if err != nil {
		return 0, apiStatus(err, "read setting "+string(name))
	}
	percent, err := strconv.Atoi(value)
	if err != nil || percent < 0 {
		return 0, status.Errorf(codes.Internal, "setting %s: %q is not a percentage", name, value)
	}
	return percent, nil
}

// nodeVolumeRoom is, for each disk of a node that the replica scheduler
// places replicas on (the node Ready and allowing scheduling; the disk
// ready, schedulable, allowing scheduling and above minimal percent
// free: scheduler.Place's rules), the largest volume of replicas
// replicas (each at least least bytes) it takes; a disk that takes none
// is left out.
func nodeVolumeRoom(n *client.Node, percent, minimal, replicas int, least int64) []int64 {
	if !n.Ready() || !n.AllowScheduling {
		return nil
	}
	var out []int64
	for _, d := range n.Disks {
		if d.DiskUUID == "" || d.StorageMaximum <= 0 || !d.Ready() || !d.AllowScheduling || d.Conditions["Schedulable"].Status == "False" ||
			d.StorageAvailable <= d.StorageMaximum/100*int64(minimal) {
			continue
		}
		// As datastore.RoomiestDisk counts it, to the byte.
		room := (d.StorageMaximum-d.StorageReserved)/100*int64(percent) - d.StorageScheduled
		size := room / int64(replicas) / sizeAlignment * sizeAlignment
		if size >= least {
			out = append(out, size)
		}
	}
	return out
}
