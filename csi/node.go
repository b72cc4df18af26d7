package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
)

// nodeTopologyKey is the topology segment a node reports, Longhorn's.
const nodeTopologyKey = "kubernetes.io/hostname"

// nodeServer is the Node service: it stages an attached volume (its NBD
// export made a block device, then a filesystem made and mounted) and
// publishes it into pods (bind mounts), and grows the device and its
// filesystem when the volume grew (node_expand.go).
type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver

	mu   sync.Mutex
	busy map[string]bool
}

func newNodeServer(d *Driver) *nodeServer { return &nodeServer{d: d, busy: map[string]bool{}} }

// lock takes a volume for one call: a second call on it meanwhile gets
// Aborted, as the spec asks, and the kubelet retries it.
func (s *nodeServer) lock(volumeID string) (func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[volumeID] {
		return nil, status.Errorf(codes.Aborted, "an operation on volume %s is in progress", volumeID)
	}
	s.busy[volumeID] = true
	return func() {
		s.mu.Lock()
		delete(s.busy, volumeID)
		s.mu.Unlock()
	}, nil
}

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             s.d.opts.NodeID,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{nodeTopologyKey: s.d.opts.NodeID}},
	}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	rpc := func(t csi.NodeServiceCapability_RPC_Type) *csi.NodeServiceCapability {
		return &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}}
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{
		rpc(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		rpc(csi.NodeServiceCapability_RPC_GET_VOLUME_STATS),
		rpc(csi.NodeServiceCapability_RPC_EXPAND_VOLUME),
		// SINGLE_NODE_SINGLE_WRITER (ReadWriteOncePod) is enforced at
		// publish, SINGLE_NODE_MULTI_WRITER allows several publishes.
		rpc(csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
	}}, nil
}

// attachedVolume reads a volume that must be attached to this node with
// its frontend, an NBD endpoint; FailedPrecondition saying why when not.
func (s *nodeServer) attachedVolume(ctx context.Context, id string) (*client.Volume, error) {
	v, err := s.d.api.Volume(ctx, id)
	switch {
	case client.IsNotFound(err):
		return nil, status.Errorf(codes.NotFound, "volume %s does not exist", id)
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "read volume %s from the manager: %v", id, err)
	case v.State != "attached" || v.CurrentNodeID == "":
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not attached (state %q); ControllerPublishVolume attaches it to node %s", id, v.State, s.d.opts.NodeID)
	case v.CurrentNodeID != s.d.opts.NodeID:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached to node %s, not to this node %s", id, v.CurrentNodeID, s.d.opts.NodeID)
	case v.FrontendDisabled || v.DisableFrontend:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached without its frontend (disableFrontend), so it has no NBD export to stage", id)
	case v.Endpoint == "":
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached to this node but has no NBD endpoint yet", id)
	}
	return v, nil
}

func (s *nodeServer) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	nc, err := parseCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	if nc, err = withContextFsType(nc, req.GetVolumeCapability(), req.GetVolumeContext()); err != nil {
		return nil, err
	}
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	log := s.d.log.WithFields(logrus.Fields{"volume": id, "stagingTargetPath": staging})
	v, err := s.attachedVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	endpoint, imName := v.Endpoint, v.InstanceManagerName()

	st, err := s.d.loadState(id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if st != nil {
		if st.Block != nc.block || (!nc.block && st.FsType != "" && st.FsType != nc.fsType) {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s is staged already with another capability (%s)", id, st.Describe())
		}
		stands, why, err := s.d.deviceStands(ctx, st)
		if err != nil {
			// Its keeper does not answer: nothing is undone on a guess.
			return nil, err
		}
		if st.Endpoint != endpoint {
			stands, why = false, fmt.Sprintf("the volume is attached at another endpoint now, %s, not %s", endpoint, st.Endpoint)
		}
		if st.DeviceOwner == nodestate.OwnerInstanceManager && st.InstanceManager != imName {
			stands, why = false, fmt.Sprintf("the volume's engine runs in instance manager %q now, not %q", imName, st.InstanceManager)
		}
		if stands {
			if nc.block {
				return &csi.NodeStageVolumeResponse{}, nil
			}
			if m, _ := mountAt(staging); m != nil && m.Source == st.Device {
				return &csi.NodeStageVolumeResponse{}, nil
			}
		} else {
			// Left by a driver or node that stopped, or a volume attached
			// again since: what it recorded no longer works; undo it.
			log.WithFields(logrus.Fields{"state": st.Describe(), "why": why, "owner": st.DeviceOwner}).Info("Undoing a stale stage of the volume")
			if err := s.unstage(ctx, st, log); err != nil {
				return nil, err
			}
			st = nil
		}
	}
	if st == nil {
		// Saved with its owner before the device is asked for: a driver
		// that dies meanwhile knows where to undo it.
		st = &stagedVolume{VolumeID: id, Endpoint: endpoint, Block: nc.block, DeviceOwner: s.d.owner()}
		if st.DeviceOwner == nodestate.OwnerInstanceManager {
			// Where the engine runs: its export is that instance
			// manager's own.
			st.InstanceManager = imName
		}
		if err := s.d.saveState(st); err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := s.d.connectDevice(ctx, st, log); err != nil {
			if uerr := s.unstage(ctx, st, log); uerr != nil {
				log.WithError(uerr).Warn("Could not undo a failed stage")
			}
			return nil, err
		}
	}
	if nc.block {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := s.stageFilesystem(ctx, v, st, staging, nc, log); err != nil {
		if uerr := s.unstage(ctx, st, log); uerr != nil {
			log.WithError(uerr).Warn("Could not undo a failed stage")
		}
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// stageFilesystem makes the capability's filesystem on st's device when
// it has none, and mounts it at staging.
func (s *nodeServer) stageFilesystem(ctx context.Context, v *client.Volume, st *stagedVolume, staging string, nc nodeCapability, log *logrus.Entry) error {
	p, err := probeDevice(ctx, st.Device)
	if err != nil {
		return status.Errorf(codes.Internal, "probe volume %s's device %s: %v", st.VolumeID, st.Device, err)
	}
	if p.FsType == "" && p.PartTable == "" && !p.Ambiguous {
		// Nothing blkid knows: data first. Whatever was ever written, or
		// a backing image, is not formatted over.
		if p.BackingImage = v.BackingImage; p.BackingImage == "" {
			if p.Written, err = s.d.api.WrittenBytes(ctx, st.VolumeID); err != nil {
				return status.Errorf(codes.Unavailable, "read volume %s's snapshots from the manager, to know whether it holds data: %v", st.VolumeID, err)
			}
		}
	}
	format, err := needsFormat(p, nc.fsType)
	if errors.Is(err, errDeviceInUse) {
		return status.Errorf(codes.FailedPrecondition, "volume %s: %v", st.VolumeID, err)
	}
	if format {
		log.WithFields(logrus.Fields{"device": st.Device, "fsType": nc.fsType, "mkfsParams": nc.mkfsParams}).Info("Making a filesystem on the volume, which has none")
		if err := makeFilesystem(ctx, st.Device, nc.fsType, nc.mkfsParams); err != nil {
			return status.Errorf(codes.Internal, "make a %s filesystem on volume %s: %v", nc.fsType, st.VolumeID, err)
		}
		st.Formatted = true
	}
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return status.Errorf(codes.Internal, "staging_target_path %s: %v", staging, err)
	}
	st.StagingPath, st.FsType = canonical(staging), nc.fsType
	if err := s.d.saveState(st); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	// The volume may have grown since its filesystem was last mounted; a
	// volume staged read-only is not written to.
	grow := !format && !nc.readOnly && !slices.Contains(nc.mountFlags, "ro")
	if grow {
		growFilesystemOffline(ctx, st.Device, nc.fsType, log)
	}
	options := stageMountOptions(nc.fsType, nc.mountFlags)
	if err := mount(ctx, st.Device, staging, nc.fsType, options); err != nil {
		return status.Errorf(codes.Internal, "mount volume %s at staging_target_path %s: %v", st.VolumeID, staging, err)
	}
	log.WithFields(logrus.Fields{"device": st.Device, "fsType": nc.fsType, "flags": options}).Info("Mounted the volume at its staging path")
	if grow && nc.fsType == "xfs" {
		// xfs grows only mounted.
		if err := growFilesystem(ctx, st, log); err != nil {
			log.WithError(err).Warn("Could not grow the volume's xfs filesystem to its device's size: it is mounted at its old size")
		}
	}
	return nil
}

func (s *nodeServer) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	id, staging := req.GetVolumeId(), req.GetStagingTargetPath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	log := s.d.log.WithFields(logrus.Fields{"volume": id, "stagingTargetPath": staging})
	st, err := s.d.loadState(id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if st == nil {
		// Never staged, or unstaged already: only a mount may be left.
		if err := unmountAll(staging); err != nil {
			return nil, status.Errorf(codes.Internal, "staging_target_path %s: %v", staging, err)
		}
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if st.StagingPath == "" {
		st.StagingPath = canonical(staging)
	}
	if err := s.unstage(ctx, st, log); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// unstage undoes a stage: the filesystem's mount, the device (where it is
// kept), the state. A device a pod still uses (a publish not undone) is
// left alone, and so is everything while the device's keeper does not
// answer.
func (s *nodeServer) unstage(ctx context.Context, st *stagedVolume, log *logrus.Entry) error {
	dev, err := s.d.stagedDevice(ctx, st)
	if err != nil {
		return err
	}
	if dev != "" {
		points, err := mountsOf(dev)
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		var others []string
		for _, p := range points {
			if p != st.StagingPath {
				others = append(others, p)
			}
		}
		if len(others) > 0 {
			return status.Errorf(codes.FailedPrecondition, "volume %s is still published at %s: NodeUnpublishVolume first", st.VolumeID, strings.Join(others, ", "))
		}
	}
	if st.StagingPath != "" {
		if mounted, _ := isMountPoint(st.StagingPath); mounted {
			if err := unmountAll(st.StagingPath); err != nil {
				return status.Errorf(codes.Internal, "staging_target_path %s: %v", st.StagingPath, err)
			}
			log.Info("Unmounted the volume's staging path")
		}
	}
	if err := s.d.disconnectDevice(ctx, st, log); err != nil {
		return err
	}
	if err := s.d.removeState(st.VolumeID); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}
