package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeExpandVolume grows a staged volume's device to the size its engine
// has now (ControllerExpandVolume grew it), then its filesystem, online:
// resize2fs on the device for ext4, xfs_growfs on the staging path for
// xfs; a block volume's device alone. The device is a loop device over
// nbdfuse's file of the export's window (node_device.go), limited to the
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
	if !deviceHealthy(st) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s's device (%s) no longer stands: unstage and stage it again", id, st.Describe())
	}
	if !st.Window {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s was staged by an earlier driver, whose device cannot grow: unstage and stage it again, then expand", id)
	}
	size, err := exportSize(ctx, st.Endpoint)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "read volume %s's size from its engine: %v", id, err)
	}
	if want := req.GetCapacityRange().GetRequiredBytes(); want > size {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: volume %s's engine has %d bytes, not the %d asked for: ControllerExpandVolume grows it first", id, size, want)
	}
	if limit := req.GetCapacityRange().GetLimitBytes(); limit > 0 && size > limit {
		return nil, status.Errorf(codes.OutOfRange, "capacity_range: volume %s has %d bytes, more than limit_bytes %d", id, size, limit)
	}
	from, err := loopSize(st.Device)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s's device %s: %v", id, st.Device, err)
	}
	if size > from {
		if err := growLoop(st.Device, size); err != nil {
			return nil, status.Errorf(codes.Internal, "grow volume %s's device %s from %d to %d bytes: %v", id, st.Device, from, size, err)
		}
		log.WithFields(logrus.Fields{"device": st.Device, "from": from, "to": size}).Info("Grew the volume's device")
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

// exportSize is the size of an NBD export, as nbdinfo reads it.
func exportSize(ctx context.Context, uri string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := run(ctx, "nbdinfo", "--size", uri)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("nbdinfo --size %s: %q is not a size", uri, strings.TrimSpace(out))
	}
	return n, nil
}

// loopSize is a loop device's size in bytes, as the kernel has it.
func loopSize(device string) (int64, error) {
	data, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(device), "size"))
	if err != nil {
		return 0, err
	}
	sectors, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: size %q: %w", device, data, err)
	}
	return sectors * 512, nil
}

// growLoop raises a loop device's size limit to size, and waits until
// the kernel shows the device at that size.
func growLoop(device string, size int64) error {
	f, err := os.OpenFile(device, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("LOOP_GET_STATUS64: %w", err)
	}
	info.Sizelimit = uint64(size)
	if err := unix.IoctlLoopSetStatus64(int(f.Fd()), info); err != nil {
		return fmt.Errorf("LOOP_SET_STATUS64 (size limit %d): %w", size, err)
	}
	return waitFor(10*time.Second, func() bool {
		n, err := loopSize(device)
		return err == nil && n >= size
	})
}
