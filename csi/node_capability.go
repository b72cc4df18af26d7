package csi

import (
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// nodeCapability is what the Node service takes from a VolumeCapability.
type nodeCapability struct {
	block      bool
	fsType     string
	mountFlags []string
	readOnly   bool
	// singleWriter: SINGLE_NODE_SINGLE_WRITER (a ReadWriteOncePod claim):
	// one publish at a time.
	singleWriter bool
	// mkfsParams are the StorageClass's words for mkfs (volume context).
	mkfsParams []string
}

// parseCapability checks a volume capability: InvalidArgument naming the
// field for what the driver cannot do.
func parseCapability(c *csi.VolumeCapability) (nodeCapability, error) {
	var nc nodeCapability
	if c == nil {
		return nc, status.Error(codes.InvalidArgument, "volume_capability is missing")
	}
	switch c.GetAccessMode().GetMode() {
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER:
		nc.singleWriter = true
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:
	case csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:
		nc.readOnly = true
	case csi.VolumeCapability_AccessMode_UNKNOWN:
		return nc, status.Error(codes.InvalidArgument, "volume_capability.access_mode is missing")
	default:
		return nc, status.Errorf(codes.InvalidArgument, "volume_capability.access_mode %s is not supported: a volume attaches to one node", c.GetAccessMode().GetMode())
	}
	switch t := c.GetAccessType().(type) {
	case *csi.VolumeCapability_Block:
		nc.block = true
	case *csi.VolumeCapability_Mount:
		nc.fsType = strings.ToLower(t.Mount.GetFsType())
		if nc.fsType == "" {
			nc.fsType = defaultFsType
		}
		if _, ok := supportedFsTypes[nc.fsType]; !ok {
			return nc, status.Errorf(codes.InvalidArgument, "volume_capability.mount.fs_type %q is not supported: ext4 (the default) or xfs", t.Mount.GetFsType())
		}
		nc.mountFlags = t.Mount.GetMountFlags()
	default:
		return nc, status.Error(codes.InvalidArgument, "volume_capability.access_type is missing: mount or block")
	}
	return nc, nil
}

// checkVolumeID checks a request's volume_id.
func checkVolumeID(id string) error {
	switch {
	case id == "":
		return status.Error(codes.InvalidArgument, "volume_id is missing")
	case !volumeIDPattern.MatchString(id):
		return status.Errorf(codes.NotFound, "volume_id %q is not a Longhorn volume name", id)
	}
	return nil
}

// volumeContextFsType is the volume_context key the Controller service
// gives a StorageClass's fsType in: it names the filesystem when the
// capability names none.
const volumeContextFsType = "fsType"

// withContextFsType applies the volume context's fsType to a mount
// capability that names no fs_type, and its mkfsParams (the StorageClass's,
// checked again here: the context is not trusted) to the filesystem made.
func withContextFsType(nc nodeCapability, c *csi.VolumeCapability, volumeContext map[string]string) (nodeCapability, error) {
	if !nc.block {
		extra, err := parseMkfsParams("volume_context."+paramMkfsParams, volumeContext[paramMkfsParams])
		if err != nil {
			return nc, status.Error(codes.InvalidArgument, err.Error())
		}
		nc.mkfsParams = extra
	}
	fs := strings.ToLower(volumeContext[volumeContextFsType])
	if nc.block || c.GetMount().GetFsType() != "" || fs == "" {
		return nc, nil
	}
	if _, ok := supportedFsTypes[fs]; !ok {
		return nc, status.Errorf(codes.InvalidArgument, "volume_context.fsType %q is not supported: ext4 or xfs", volumeContext[volumeContextFsType])
	}
	nc.fsType = fs
	return nc, nil
}
