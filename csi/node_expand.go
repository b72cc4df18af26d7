package csi

import (
	"context"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
)

// NodeExpandVolume grows a staged volume's device to the size its engine
// has now (ControllerExpandVolume grew it), then its filesystem, online:
// resize2fs on the device for ext4, xfs_growfs on the staging path for
// xfs; a block volume's device alone. The device is a loop device over
// nbdfuse's file of the export's window (engine/device), limited to the
// volume's size: raising that limit (LOOP_SET_STATUS64) grows the device
// in place, with no reconnect, the filesystem mounted and in use.
//
// An ext4 filesystem grows online only where the driver has
// CAP_SYS_RESOURCE (the kernel's rule for EXT4_IOC_RESIZE_FS); without
// it the call fails saying so, with the device grown, and the filesystem
// grows when the volume is next staged (growFilesystemOffline).
func (s *nodeServer) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_path is missing")
	}
	if c := req.GetVolumeCapability(); c != nil {
		if _, err := parseCapability(c); err != nil {
			return nil, err
		}
	}
	if r := req.GetCapacityRange(); r != nil && (r.GetRequiredBytes() < 0 || r.GetLimitBytes() < 0) {
		return nil, status.Error(codes.InvalidArgument, "capacity_range: bytes cannot be negative")
	}
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	log := s.d.log.WithFields(logrus.Fields{"volume": id, "volumePath": path})

	st, err := s.d.loadState(id)
	switch {
	case err != nil:
		return nil, status.Error(codes.Internal, err.Error())
	case st == nil:
		return nil, status.Errorf(codes.NotFound, "volume %s is not staged on this node", id)
	}
	if !s.servesVolume(st, path) {
		return nil, status.Errorf(codes.NotFound, "volume_path %s is not where volume %s is staged or published on this node", path, id)
	}
	if stands, why, err := s.d.deviceStands(ctx, st); err != nil {
		return nil, err
	} else if !stands {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s's device (%s) no longer stands (%s): unstage and stage it again", id, st.Describe(), why)
	}
	if st.DeviceOwner == nodestate.OwnerLegacy && !st.Window {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s was staged by an earlier driver, whose device cannot grow: unstage and stage it again, then expand", id)
	}
	// The device grows to the engine's size (where it is kept: the
	// instance manager's, or this driver's), with no reconnect.
	size, err := s.d.expandDevice(ctx, st, log)
	if err != nil {
		return nil, err
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > size {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: volume %s's engine has %d bytes, not the %d asked for: ControllerExpandVolume grows it first", id, size, want)
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && size > limit {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: volume %s has %d bytes, more than limit_bytes %d", id, size, limit)
	}
	if !st.Block {
		if err := growFilesystem(ctx, st, log); err != nil {
			return nil, err
		}
	}
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// servesVolume says whether path is st's staging path, or a target path
// it is published at: a bind mount of its filesystem (which the kernel
// lists with the filesystem's device as its source) or of its device.
func (s *nodeServer) servesVolume(st *stagedVolume, path string) bool {
	path = canonical(path)
	if st.StagingPath != "" && path == st.StagingPath {
		return true
	}
	if st.Block && sameDevice(path, st.Device) {
		return true
	}
	m, err := mountAt(path)
	return err == nil && m != nil && m.Source == st.Device
}
