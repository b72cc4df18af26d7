package csi

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
)

func (s *nodeServer) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, staging, target := req.GetVolumeId(), req.GetStagingTargetPath(), req.GetTargetPath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if staging == "" {
		return nil, status.Error(codes.InvalidArgument, "staging_target_path is missing")
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	nc, err := parseCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	readOnly := req.GetReadonly() || nc.readOnly
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	log := s.d.log.WithFields(logrus.Fields{"volume": id, "targetPath": target, "readOnly": readOnly})

	st, err := s.d.loadState(id)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	stands, why := false, "it has no stage"
	if st != nil {
		if stands, why, err = s.d.deviceStands(ctx, st); err != nil {
			return nil, err
		}
	}
	switch {
	case !stands:
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged on this node (%s): NodeStageVolume first", id, why)
	case st.Block != nc.block:
		return nil, status.Errorf(codes.InvalidArgument, "volume_capability: volume %s is staged as %s", id, st.Describe())
	}
	if m, err := mountAt(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if m != nil {
		// Published already: the same call again, or another one.
		if isReadOnly(m.Options) != readOnly {
			return nil, status.Errorf(codes.AlreadyExists, "target_path %s is published already with another read-only setting", target)
		}
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := checkSingleWriter(st, target, nc.singleWriter); err != nil {
		return nil, err
	}

	source := staging
	if nc.block {
		// The pod's path is a file the device is bind-mounted onto.
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "target_path %s: %v", target, err)
		}
		f, err := os.OpenFile(target, os.O_CREATE|os.O_RDONLY, 0o600)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "target_path %s: %v", target, err)
		}
		f.Close()
		source = st.Device
	} else {
		m, err := mountAt(staging)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if m == nil || m.Source != st.Device {
			return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not mounted at staging_target_path %s: NodeStageVolume first", id, staging)
		}
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "target_path %s: %v", target, err)
		}
	}
	if err := bindMount(ctx, source, target, readOnly, nc.mountFlags); err != nil {
		return nil, status.Errorf(codes.Internal, "publish volume %s at target_path %s: %v", id, target, err)
	}
	st.Publishes = append(slices.DeleteFunc(st.Publishes, func(p nodestate.Publish) bool { return p.Target == target }),
		nodestate.Publish{Target: target, SingleWriter: nc.singleWriter})
	if err := s.d.saveState(st); err != nil {
		_ = unmountAll(target)
		return nil, status.Errorf(codes.Internal, "publish volume %s at target_path %s: record it: %v", id, target, err)
	}
	log.WithFields(logrus.Fields{"source": source, "singleWriter": nc.singleWriter}).Info("Published the volume")
	return &csi.NodePublishVolumeResponse{}, nil
}

// checkSingleWriter refuses a publish at target while the volume is
// published elsewhere and either publish is for a single writer
// (SINGLE_NODE_SINGLE_WRITER, a ReadWriteOncePod claim): the access mode
// promises one pod. Publishes whose target is no longer mounted are left
// out (and dropped at the next save).
func checkSingleWriter(st *stagedVolume, target string, singleWriter bool) error {
	var live []nodestate.Publish
	for _, p := range st.Publishes {
		if p.Target == target {
			continue
		}
		if m, err := mountAt(p.Target); err != nil || m == nil {
			continue
		}
		live = append(live, p)
		if singleWriter || p.SingleWriter {
			return status.Errorf(codes.FailedPrecondition, "volume %s is published at %s (single writer: %v): a ReadWriteOncePod volume is published for one pod at a time",
				st.VolumeID, p.Target, p.SingleWriter)
		}
	}
	st.Publishes = live
	return nil
}

// isReadOnly says whether mount options include ro.
func isReadOnly(options string) bool {
	for _, o := range strings.Split(options, ",") {
		if o == "ro" {
			return true
		}
	}
	return false
}

func (s *nodeServer) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target_path is missing")
	}
	unlock, err := s.lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := unmountAll(target); err != nil {
		return nil, status.Errorf(codes.Internal, "target_path %s: %v", target, err)
	}
	if st, err := s.d.loadState(id); err == nil && st != nil {
		if n := len(st.Publishes); n > 0 {
			st.Publishes = slices.DeleteFunc(st.Publishes, func(p nodestate.Publish) bool { return p.Target == target })
			if len(st.Publishes) != n {
				if err := s.d.saveState(st); err != nil {
					return nil, status.Errorf(codes.Internal, "unpublish volume %s: record it: %v", id, err)
				}
			}
		}
	}
	// The spec has the driver remove the path it made.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "target_path %s: %v", target, err)
	}
	s.d.log.WithFields(logrus.Fields{"volume": id, "targetPath": target}).Info("Unpublished the volume")
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

func (s *nodeServer) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	id, path := req.GetVolumeId(), req.GetVolumePath()
	if err := checkVolumeID(id); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_path is missing")
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "volume_path %s does not exist", path)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume_path %s: %v", path, err)
	}
	if mounted, err := isMountPoint(path); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	} else if !mounted {
		return nil, status.Errorf(codes.NotFound, "volume %s is not mounted at volume_path %s", id, path)
	}
	if fi.Mode()&os.ModeDevice != 0 {
		size, err := deviceSize(path)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume_path %s: %v", path, err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}}}, nil
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return nil, status.Errorf(codes.Internal, "statfs volume_path %s: %v", path, err)
	}
	bsize := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(fs.Blocks) * bsize, Available: int64(fs.Bavail) * bsize, Used: int64(fs.Blocks-fs.Bfree) * bsize},
		{Unit: csi.VolumeUsage_INODES, Total: int64(fs.Files), Available: int64(fs.Ffree), Used: int64(fs.Files - fs.Ffree)},
	}}, nil
}

// deviceSize is a block device's size in bytes.
func deviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return f.Seek(0, io.SeekEnd)
}
