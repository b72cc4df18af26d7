package csi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// Sizes, Longhorn's: a volume is a whole number of 2 MiB, at least 10 MiB
// (an xfs filesystem needs 300 MiB).
const (
	sizeAlignment    = 2 << 20
	minimalSize      = 10 << 20
	minimalSizeXFS   = 300 << 20
	defaultWaitState = 90 * time.Second
	pollState        = 500 * time.Millisecond
	// cacheLagWait bounds, and cacheLagPoll paces, the wait for the API
	// to show a write of the driver's own (its cache lags its writes).
	cacheLagWait = 5 * time.Second
	cacheLagPoll = 20 * time.Millisecond
	// volumeDeleting is the state of a volume being deleted.
	volumeDeleting = "deleting"
)

type controllerServer struct {
	csi.UnimplementedControllerServer
	d *Driver
}

func (s *controllerServer) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	var caps []*csi.ControllerServiceCapability
	for _, t := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
		csi.ControllerServiceCapability_RPC_LIST_VOLUMES,
		csi.ControllerServiceCapability_RPC_CLONE_VOLUME,
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		csi.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
		csi.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
		csi.ControllerServiceCapability_RPC_GET_CAPACITY,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// volumeSize is the size a capacity range asks for, rounded as Longhorn
// rounds it.
func volumeSize(r *csi.CapacityRange, fsType string) (int64, error) {
	want := r.GetRequiredBytes()
	if want < 0 || r.GetLimitBytes() < 0 {
		return 0, status.Error(codes.InvalidArgument, "capacity_range: bytes cannot be negative")
	}
	if limit := r.GetLimitBytes(); limit > 0 && want > limit {
		return 0, status.Errorf(codes.InvalidArgument, "capacity_range: required_bytes %d is more than limit_bytes %d", want, limit)
	}
	least := int64(minimalSize)
	if fsType == "xfs" {
		least = minimalSizeXFS
	}
	size := max(want, least)
	size = (size + sizeAlignment - 1) / sizeAlignment * sizeAlignment
	if limit := r.GetLimitBytes(); limit > 0 && size > limit {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range: the volume would be %d bytes (at least %d, a multiple of %d), more than limit_bytes %d", size, least, sizeAlignment, limit)
	}
	return size, nil
}

// checkCapabilities refuses what the driver cannot serve: a volume is
// used by one node at a time, as a filesystem (ext4 or xfs) or a block
// device.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	for i, c := range caps {
		switch {
		case c.GetBlock() != nil:
		case c.GetMount() != nil:
			if _, err := checkFsType("volume_capabilities.mount.fs_type", c.GetMount().GetFsType()); err != nil {
				return status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: %v", i, err)
			}
		default:
			return status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: access_type must be mount or block", i)
		}
		if c.GetAccessMode() == nil {
			return status.Errorf(codes.InvalidArgument, "volume_capabilities[%d]: access_mode is required", i)
		}
		if !singleNode[c.GetAccessMode().GetMode()] {
			return status.Errorf(codes.InvalidArgument, "volume_capabilities[%d].access_mode: %v is not supported: a volume is used by one node at a time", i, c.GetAccessMode().GetMode())
		}
	}
	return nil
}

var singleNode = map[csi.VolumeCapability_AccessMode_Mode]bool{
	csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER:        true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY:   true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER: true,
	csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER:  true,
}

// fsTypeOf is the filesystem the capabilities or the parameters name.
func fsTypeOf(caps []*csi.VolumeCapability, param string) string {
	for _, c := range caps {
		if t := c.GetMount().GetFsType(); t != "" {
			return t
		}
	}
	return param
}

func (s *controllerServer) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	name := volumeName(req.GetName())
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	params, err := parseParams(req.GetParameters())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	fsType := fsTypeOf(req.GetVolumeCapabilities(), params.fsType)
	volCtx := volumeContext(req.GetParameters(), fsType)
	contentSource := req.GetVolumeContentSource()

	existing, err := s.d.api.Volume(ctx, name)
	switch {
	case err == nil:
		capacity := req.GetCapacityRange()
		if contentSource != nil && capacity.GetRequiredBytes() == 0 {
			// A copy's size, when none is asked, is its source's: the
			// volume's, as it was made.
			capacity = &csi.CapacityRange{RequiredBytes: sizeOf(existing), LimitBytes: capacity.GetLimitBytes()}
		}
		size, err := volumeSize(capacity, fsType)
		if err != nil {
			return nil, err
		}
		have, _ := strconv.ParseInt(existing.Size, 10, 64)
		if have != size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, not the %d asked for", name, have, size)
		}
		if err := sameContentSource(existing, contentSource, params.create); err != nil {
			return nil, err
		}
		return s.readyVolume(ctx, name, size, volCtx, existing.DataSource, existing.FromBackup, contentSource)
	case !client.IsNotFound(err):
		return nil, apiStatus(err, "read volume "+name)
	}
	src, err := s.readContentSource(ctx, contentSource, params)
	if err != nil {
		return nil, err
	}
	capacity := req.GetCapacityRange()
	if src != nil && capacity.GetRequiredBytes() == 0 {
		capacity = &csi.CapacityRange{RequiredBytes: src.size, LimitBytes: capacity.GetLimitBytes()}
	}
	size, err := volumeSize(capacity, fsType)
	if err != nil {
		return nil, err
	}
	if err := src.checkSize(size); err != nil {
		return nil, err
	}

	if err := s.checkSelector(ctx, params); err != nil {
		return nil, err
	}
	if err := s.prepareBackingImage(ctx, params); err != nil {
		return nil, err
	}
	made, err := s.ensureJobs(ctx, params.jobs)
	if err != nil {
		return nil, err
	}
	in := params.create
	in.Name, in.Size = name, strconv.FormatInt(size, 10)
	if src != nil {
		in.DataSource, in.FromBackup = src.dataSource, src.fromBackup
		if src.backingImage != "" {
			in.BackingImage = src.backingImage
		}
	}
	if in.DataSource == "" {
		// A clone is made where its source is; any other volume on the
		// node the topology asks for first.
		node, err := s.selectedNode(ctx, req.GetAccessibilityRequirements())
		if err != nil {
			s.undoJobs(made)
			return nil, err
		}
		in.SelectedNode = node
	}
	if _, err := s.d.api.CreateVolume(ctx, in); err != nil {
		s.undoJobs(made)
		return nil, apiStatus(err, "create volume "+name)
	}
	return s.readyVolume(ctx, name, size, volCtx, in.DataSource, in.FromBackup, contentSource)
}

// topologyNode is the node a volume's replicas should go to: the first
// preferred topology's node (the node the scheduler chose, for a
// WaitForFirstConsumer claim, which external-provisioner puts first),
// else the requisite's when it names one node alone; "" when the request
// names none.
func topologyNode(req *csi.TopologyRequirement) string {
	for _, t := range req.GetPreferred() {
		if n := t.GetSegments()[nodeTopologyKey]; n != "" {
			return n
		}
	}
	if r := req.GetRequisite(); len(r) == 1 {
		return r[0].GetSegments()[nodeTopologyKey]
	}
	return ""
}

// selectedNode is the Longhorn node the topology asks for, or "" (any
// node) when it asks for none or for a node no manager runs on (a
// Kubernetes node whose hostname label is not its name, say): the volume
// is then placed anywhere and its PV's node affinity sends the pod there,
// rather than the claim failing.
func (s *controllerServer) selectedNode(ctx context.Context, req *csi.TopologyRequirement) (string, error) {
	node := topologyNode(req)
	if node == "" {
		return "", nil
	}
	if _, err := s.d.api.Node(ctx, node); client.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", apiStatus(err, "read node "+node)
	}
	return node, nil
}

// readyVolume answers a volume once it is placed and, when it is made
// from a content source or a backup, once it holds it; the answer echoes
// the content source.
func (s *controllerServer) readyVolume(ctx context.Context, name string, size int64, volCtx map[string]string,
	dataSource, fromBackup string, contentSource *csi.VolumeContentSource) (*csi.CreateVolumeResponse, error) {
	resp, err := s.placedVolume(ctx, name, size, volCtx)
	if err != nil {
		return nil, err
	}
	if err := s.waitPopulated(ctx, name, dataSource, fromBackup); err != nil {
		return nil, err
	}
	resp.Volume.ContentSource = contentSource
	return resp, nil
}

// placedVolume waits until the volume is created and its replicas are
// placed, and answers it with the node that holds them as its topology:
// the volume attaches there only, so its PV's node affinity sends the
// pods that use it there.
func (s *controllerServer) placedVolume(ctx context.Context, name string, size int64, volCtx map[string]string) (*csi.CreateVolumeResponse, error) {
	var node string
	if err := s.waitVolume(ctx, name, "created with its replicas placed", func(v *client.Volume) bool {
		if v == nil || v.State == "" || v.State == "creating" {
			return false
		}
		node = v.ReplicasNode()
		return node != ""
	}); err != nil {
		return nil, err
	}
	resp := createdVolume(name, size, volCtx)
	resp.Volume.AccessibleTopology = []*csi.Topology{{Segments: map[string]string{nodeTopologyKey: node}}}
	return resp, nil
}

// volumeContext is what the Node service is told of a volume: its
// filesystem, and the parameters it was made with.
func volumeContext(params map[string]string, fsType string) map[string]string {
	out := map[string]string{}
	for k, v := range params {
		out[k] = v
	}
	if fsType != "" {
		out[paramFsType] = fsType
	}
	return out
}

func createdVolume(name string, size int64, context map[string]string) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: name, CapacityBytes: size, VolumeContext: context}}
}

func (s *controllerServer) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	name := req.GetVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	}
	err := s.d.api.DeleteVolume(ctx, name)
	if client.IsNotFound(err) {
		return &csi.DeleteVolumeResponse{}, nil
	}
	if err != nil {
		return nil, apiStatus(err, "delete volume "+name)
	}
	// Until the API shows the deletion, a list would still show the
	// volume as if it were there to stay.
	if err := s.waitVolume(ctx, name, "deleting", func(v *client.Volume) bool { return v == nil || v.State == volumeDeleting }); err != nil {
		return nil, err
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *controllerServer) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	name := req.GetVolumeId()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "volume_id: required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume_capabilities: at least one is required")
	}
	if _, err := s.d.api.Volume(ctx, name); err != nil {
		return nil, apiStatus(err, "read volume "+name)
	}
	if err := checkCapabilities(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: status.Convert(err).Message()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: req.GetVolumeContext(), VolumeCapabilities: req.GetVolumeCapabilities(), Parameters: req.GetParameters(),
	}}, nil
}

// ListVolumes pages through the volumes by name; a token is the index of
// the next entry.
func (s *controllerServer) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, status.Error(codes.InvalidArgument, "max_entries: cannot be negative")
	}
	all, err := s.d.api.Volumes(ctx)
	if err != nil {
		return nil, apiStatus(err, "list volumes")
	}
	var volumes []client.Volume
	for _, v := range all {
		if v.State != volumeDeleting {
			volumes = append(volumes, v)
		}
	}
	start := 0
	if t := req.GetStartingToken(); t != "" {
		if start, err = strconv.Atoi(t); err != nil || start < 0 || start > len(volumes) {
			return nil, status.Errorf(codes.Aborted, "starting_token: %q is not a token this driver gave, or the list has changed", t)
		}
	}
	end := len(volumes)
	if n := int(req.GetMaxEntries()); n > 0 && start+n < end {
		end = start + n
	}
	resp := &csi.ListVolumesResponse{}
	for _, v := range volumes[start:end] {
		size, _ := strconv.ParseInt(v.Size, 10, 64)
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{Volume: &csi.Volume{VolumeId: v.Name, CapacityBytes: size}})
	}
	if end < len(volumes) {
		resp.NextToken = strconv.Itoa(end)
	}
	return resp, nil
}

// waitVolume polls the volume until done says so (given nil when the
// API does not find it: just created, the API's cache may not have it
// yet), the call's deadline or defaultWaitState passes.
func (s *controllerServer) waitVolume(ctx context.Context, name, what string, done func(*client.Volume) bool) error {
	return s.pollVolume(ctx, name, what, defaultWaitState, pollState, done)
}

// pollVolume reads the volume every interval until done says so, the
// call's deadline or timeout passes (DeadlineExceeded, saying what it
// waited for and how the volume was).
func (s *controllerServer) pollVolume(ctx context.Context, name, what string, timeout, interval time.Duration, done func(*client.Volume) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		v, err := s.d.api.Volume(ctx, name)
		if client.IsNotFound(err) {
			v, err = nil, nil
		}
		if err == nil && done(v) {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("volume %s: not %s in time", name, what)
			switch {
			case err != nil:
				msg += ": " + err.Error()
			case v == nil:
				msg += " (not found)"
			default:
				msg += fmt.Sprintf(" (state %q)", v.State)
			}
			return status.Error(codes.DeadlineExceeded, msg)
		case <-time.After(interval):
		}
	}
}
