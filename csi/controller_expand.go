package csi

import (
	"context"
	"fmt"
	"strconv"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// ControllerExpandVolume grows a volume, as the external-resizer asks when
// a claim's request grows: the size is rounded as CreateVolume rounds it,
// the volume's spec.size raised through the manager's expand action, and
// the call returns once the data plane has the new size (at once for a
// detached volume, whose engine grows it when it next attaches). A volume
// already at least as large as required_bytes is answered as it is
// (idempotent; it never shrinks), unless it is larger than limit_bytes,
// which is OutOfRange, as is a size no disk has room for.
//
// node_expansion_required is true for block volumes too, unlike
// Longhorn's: a node's device of the volume is a loop device limited to
// the volume's size (node_device.go), which only NodeExpandVolume grows.
func (s *controllerServer) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	name := req.GetVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Error(codes.InvalidArgument, "capacity_range: required")
	}
	fsType := ""
	if c := req.GetVolumeCapability(); c != nil {
		if err := checkCapabilities([]*csi.VolumeCapability{c}); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "volume_capability: %v", status.Convert(err).Message())
		}
		fsType = c.GetMount().GetFsType()
	}
	size, err := volumeSize(req.GetCapacityRange(), fsType)
	if err != nil {
		return nil, err
	}
	v, err := s.d.api.Volume(ctx, name)
	if err != nil {
		return nil, apiStatus(err, "read volume "+name)
	}
	if v.State == volumeDeleting {
		return nil, status.Errorf(codes.NotFound, "volume %s is being deleted", name)
	}
	have, _ := strconv.ParseInt(v.Size, 10, 64)
	log := s.d.log.WithFields(logrus.Fields{"volume": name, "from": have, "to": size})
	if size <= have {
		if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && have > limit {
			return nil, status.Errorf(codes.OutOfRange, "capacity_range: volume %s has %d bytes, more than limit_bytes %d, and a volume never shrinks", name, have, limit)
		}
		size = have
	} else {
		grown, err := s.d.api.ExpandVolume(ctx, name, size)
		if err != nil {
			return nil, apiStatus(err, fmt.Sprintf("expand volume %s to %d bytes", name, size))
		}
		size, _ = strconv.ParseInt(grown.Size, 10, 64)
		log.Info("Expanded volume")
	}
	// An attached volume's engine grows it at once; wait until it has, so
	// that NodeExpandVolume, which follows, finds the device's new size.
	if err := s.waitVolume(ctx, name, fmt.Sprintf("grown to %d bytes by its engine", size), func(v *client.Volume) bool {
		return v != nil && (v.State != "attached" || v.ActualSize() >= size)
	}); err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: size, NodeExpansionRequired: true}, nil
}
