package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// ControllerPublishVolume attaches the volume, with its frontend, to the
// node a pod that uses it runs on, and returns once it is attached there.
func (s *controllerServer) ControllerPublishVolume(ctx context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	name, node := req.GetVolumeId(), req.GetNodeId()
	switch {
	case name == "":
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	case node == "":
		return nil, status.Error(codes.InvalidArgument, "node_id: required")
	case req.GetVolumeCapability() == nil:
		return nil, status.Error(codes.InvalidArgument, "volume_capability: required")
	}
	if err := checkCapabilities([]*csi.VolumeCapability{req.GetVolumeCapability()}); err != nil {
		return nil, err
	}
	v, err := s.d.api.Volume(ctx, name)
	if err != nil {
		return nil, apiStatus(err, "read volume "+name)
	}
	if _, err := s.d.api.Node(ctx, node); err != nil {
		return nil, apiStatus(err, "read node "+node)
	}
	if v.NodeID != "" && v.NodeID != node {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is attached to node %s; it is used by one node at a time", name, v.NodeID)
	}
	if err := s.d.api.AttachForWorkload(ctx, name, node); err != nil {
		return nil, apiStatus(err, "attach volume "+name+" to node "+node)
	}
	if err := s.waitVolume(ctx, name, "attached to node "+node, func(v *client.Volume) bool {
		return v != nil && v.State == "attached" && v.CurrentNodeID == node
	}); err != nil {
		return nil, err
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

// ControllerUnpublishVolume detaches the volume from the node, when a
// workload attached it there; a volume a recurring job's run attached is
// the run's to detach.
func (s *controllerServer) ControllerUnpublishVolume(ctx context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	name, node := req.GetVolumeId(), req.GetNodeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	}
	v, err := s.d.api.Volume(ctx, name)
	if client.IsNotFound(err) {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err != nil {
		return nil, apiStatus(err, "read volume "+name)
	}
	if v.NodeID == "" || (node != "" && v.NodeID != node) || v.AttachedBy != "" {
		return &csi.ControllerUnpublishVolumeResponse{}, nil
	}
	if err := s.d.api.Detach(ctx, name, ""); err != nil && !client.IsNotFound(err) {
		return nil, apiStatus(err, "detach volume "+name)
	}
	if err := s.waitVolume(ctx, name, "detached", func(v *client.Volume) bool {
		return v == nil || v.NodeID == "" && v.CurrentNodeID == "" && v.State == "detached"
	}); err != nil {
		return nil, err
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}
