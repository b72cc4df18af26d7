package instancemanager

import (
	"context"

	"google.golang.org/grpc"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
)

// devicesDir is the folder, in the instance manager's, of the devices it
// keeps for the CSI Node service.
const devicesDir = "devices"

// DeviceServer serves the devices of one device.Manager.
type DeviceServer struct {
	pb.UnimplementedDeviceServiceServer
	devices *device.Manager
}

// NewDeviceServer serves devices.
func NewDeviceServer(devices *device.Manager) *DeviceServer { return &DeviceServer{devices: devices} }

// Register puts the service on g.
func (s *DeviceServer) Register(g *grpc.Server) { pb.RegisterDeviceServiceServer(g, s) }

func deviceToPB(st device.Status) *pb.Device {
	return &pb.Device{Volume: st.VolumeID, Endpoint: st.Endpoint, Path: st.Device, Attached: st.Attached, Size: st.Size, Window: st.Window, Healthy: st.Healthy, Why: st.Why}
}

func deviceFromPB(d *pb.Device) device.Status {
	return device.Status{VolumeID: d.Volume, Endpoint: d.Endpoint, Device: d.Path, Attached: d.Attached, Size: d.Size, Window: d.Window, Healthy: d.Healthy, Why: d.Why}
}

// Stage's device is made for the instance manager, not for the call: a
// caller that goes away (a CSI driver killed) has its device made or
// undone whole, not cut short half way.
func (s *DeviceServer) Stage(ctx context.Context, req *pb.StageDeviceRequest) (*pb.Device, error) {
	st, err := s.devices.Stage(context.WithoutCancel(ctx), req.Volume, req.Endpoint)
	if err != nil {
		return nil, deviceStatus(err)
	}
	return deviceToPB(st), nil
}

func (s *DeviceServer) Unstage(ctx context.Context, ref *pb.DeviceRef) (*pb.Empty, error) {
	return &pb.Empty{}, deviceStatus(s.devices.Unstage(context.WithoutCancel(ctx), ref.Volume))
}

func (s *DeviceServer) Get(ctx context.Context, ref *pb.DeviceRef) (*pb.Device, error) {
	st, err := s.devices.Get(ctx, ref.Volume)
	if err != nil {
		return nil, deviceStatus(err)
	}
	return deviceToPB(st), nil
}

func (s *DeviceServer) List(ctx context.Context, _ *pb.Empty) (*pb.DeviceList, error) {
	list, err := s.devices.List(ctx)
	if err != nil {
		return nil, deviceStatus(err)
	}
	out := &pb.DeviceList{}
	for _, st := range list {
		out.Devices = append(out.Devices, deviceToPB(st))
	}
	return out, nil
}

func (s *DeviceServer) Expand(ctx context.Context, ref *pb.DeviceRef) (*pb.Device, error) {
	st, err := s.devices.Expand(context.WithoutCancel(ctx), ref.Volume)
	if err != nil {
		return nil, deviceStatus(err)
	}
	return deviceToPB(st), nil
}
