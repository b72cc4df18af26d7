package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// nodeTopologyKey is the topology segment a node reports, Longhorn's.
const nodeTopologyKey = "kubernetes.io/hostname"

type nodeServer struct {
	csi.UnimplementedNodeServer
	d *Driver
}

func newNodeServer(d *Driver) *nodeServer { return &nodeServer{d: d} }

func (s *nodeServer) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{
		NodeId:             s.d.opts.NodeID,
		AccessibleTopology: &csi.Topology{Segments: map[string]string{nodeTopologyKey: s.d.opts.NodeID}},
	}, nil
}

func (s *nodeServer) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}
