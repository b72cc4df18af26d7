package instancemanager

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/engine/instancemanager/pb"
)

// deviceStageTimeout bounds a stage, which waits for nbdfuse (at most
// 30 s) and the export's size; deviceCallTimeout the other calls.
const (
	deviceStageTimeout = 2 * time.Minute
	deviceCallTimeout  = time.Minute
)

// DeviceClient is the CSI Node service's side of the devices the node's
// instance manager keeps: a device.Service over its socket.
type DeviceClient struct {
	conn *grpc.ClientConn
	dev  pb.DeviceServiceClient
}

var _ device.Service = (*DeviceClient)(nil)

// DialDevices returns the client of the devices of the instance manager
// whose folder is dir (its socket, SocketPath(dir)). It connects lazily:
// an instance manager that is not up yet is ErrUnavailable at each call
// until it is.
func DialDevices(dir string) (*DeviceClient, error) {
	sock := SocketPath(dir)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		// An instance manager started again is found within a second.
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, MaxDelay: time.Second},
			MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("instance manager at %s: %w", sock, err)
	}
	return &DeviceClient{conn: conn, dev: pb.NewDeviceServiceClient(conn)}, nil
}

// Close closes the connection; the devices stay.
func (c *DeviceClient) Close() error { return c.conn.Close() }

func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func (c *DeviceClient) Stage(ctx context.Context, volumeID, endpoint string) (device.Status, error) {
	ctx, cancel := bounded(ctx, deviceStageTimeout)
	defer cancel()
	d, err := c.dev.Stage(ctx, &pb.StageDeviceRequest{Volume: volumeID, Endpoint: endpoint})
	if err != nil {
		return device.Status{}, fromDeviceStatus(err)
	}
	return deviceFromPB(d), nil
}

func (c *DeviceClient) Unstage(ctx context.Context, volumeID string) error {
	ctx, cancel := bounded(ctx, deviceCallTimeout)
	defer cancel()
	_, err := c.dev.Unstage(ctx, &pb.DeviceRef{Volume: volumeID})
	return fromDeviceStatus(err)
}

func (c *DeviceClient) Get(ctx context.Context, volumeID string) (device.Status, error) {
	ctx, cancel := bounded(ctx, deviceCallTimeout)
	defer cancel()
	d, err := c.dev.Get(ctx, &pb.DeviceRef{Volume: volumeID})
	if err != nil {
		return device.Status{}, fromDeviceStatus(err)
	}
	return deviceFromPB(d), nil
}

func (c *DeviceClient) List(ctx context.Context) ([]device.Status, error) {
	ctx, cancel := bounded(ctx, deviceCallTimeout)
	defer cancel()
	list, err := c.dev.List(ctx, &pb.Empty{})
	if err != nil {
		return nil, fromDeviceStatus(err)
	}
	out := make([]device.Status, 0, len(list.Devices))
	for _, d := range list.Devices {
		out = append(out, deviceFromPB(d))
	}
	return out, nil
}

func (c *DeviceClient) Expand(ctx context.Context, volumeID string) (device.Status, error) {
	ctx, cancel := bounded(ctx, deviceCallTimeout)
	defer cancel()
	d, err := c.dev.Expand(ctx, &pb.DeviceRef{Volume: volumeID})
	if err != nil {
		return device.Status{}, fromDeviceStatus(err)
	}
	return deviceFromPB(d), nil
}
