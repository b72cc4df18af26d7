package csi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/engine/device"
	"github.com/cadence-storage/longhorn-manager/internal/grpcrecover"
)

// DriverName is the driver's name, Longhorn's.
const DriverName = "driver.longhorn.io"

// Options configure a Driver.
type Options struct {
	// NodeID is the Longhorn node this process runs on (the Node service)
	// or "" when it serves only the Controller service.
	NodeID string
	// Controller says whether to serve the Controller service.
	Controller bool
	// Version is reported by GetPluginInfo.
	Version string
	// StateDir keeps what the Node service must remember of each staged
	// volume across its restarts.
	StateDir string
	// InstanceManagerDir is the folder of the node's instance managers
	// (<data-dir>/instance-manager): each has its folder in it, named as
	// it is, whose socket the Node service calls to have the devices of
	// the volumes whose engines it runs made and kept there (one that
	// serves in this folder itself is the volumes' whose engines name
	// none). "" when none runs: the driver makes them itself, in StateDir.
	InstanceManagerDir string
}

// Driver serves the CSI services over the manager's API.
type Driver struct {
	api  *client.Client
	opts Options
	log  *logrus.Entry
	// ims are the clients of the devices of the node's instance managers,
	// by folder, dialed at their first use; local, made at its first use,
	// keeps those the driver makes itself (node_device.go).
	imMu      sync.Mutex
	ims       map[string]device.Service
	localOnce sync.Once
	local     *device.Manager
	localErr  error
}

// NewDriver returns a driver that reaches the manager through api.
func NewDriver(api *client.Client, opts Options) (*Driver, error) {
	if !opts.Controller && opts.NodeID == "" {
		return nil, errors.New("the driver serves nothing: give it a node ID (the Node service), the Controller service, or both")
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	d := &Driver{api: api, opts: opts, log: logrus.WithField("component", "csi")}
	if opts.InstanceManagerDir != "" {
		if opts.NodeID == "" {
			return nil, errors.New("an instance manager folder is for the Node service's devices: give the driver a node ID too")
		}
		d.ims = map[string]device.Service{}
	}
	return d, nil
}

// Serve serves the driver's services on endpoint, unix:///path/csi.sock,
// until ctx ends.
func (d *Driver) Serve(ctx context.Context, endpoint string) error {
	path, err := socketPath(endpoint)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	// A socket left by a process that stopped is ours to replace.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	srv := d.NewServer()
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	d.log.WithFields(logrus.Fields{"endpoint": endpoint, "node": d.opts.NodeID, "controller": d.opts.Controller, "instanceManagerDir": d.opts.InstanceManagerDir}).Info("Serving the CSI driver")
	return srv.Serve(l)
}

// NewServer returns the gRPC server of the driver's services.
func (d *Driver) NewServer() *grpc.Server {
	opts := grpcrecover.ServerOptions(d.log)
	opts = append(opts, grpc.ChainUnaryInterceptor(d.logCalls))
	srv := grpc.NewServer(opts...)
	csi.RegisterIdentityServer(srv, &identityServer{d: d})
	if d.opts.Controller {
		csi.RegisterControllerServer(srv, &controllerServer{d: d})
	}
	if d.opts.NodeID != "" {
		csi.RegisterNodeServer(srv, newNodeServer(d))
	}
	return srv
}

// logCalls logs each call that changes something, and every failure.
func (d *Driver) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	resp, err := handler(ctx, req)
	log := d.log.WithField("call", method)
	if v, ok := req.(interface{ GetVolumeId() string }); ok && v.GetVolumeId() != "" {
		log = log.WithField("volume", v.GetVolumeId())
	}
	if v, ok := req.(interface{ GetName() string }); ok && v.GetName() != "" {
		log = log.WithField("name", v.GetName())
	}
	if v, ok := req.(interface{ GetSourceVolumeId() string }); ok && v.GetSourceVolumeId() != "" {
		log = log.WithField("volume", v.GetSourceVolumeId())
	}
	if v, ok := req.(interface{ GetSnapshotId() string }); ok && v.GetSnapshotId() != "" {
		log = log.WithField("snapshotID", v.GetSnapshotId())
	}
	switch {
	case err != nil:
		log.WithError(err).Warn("CSI call failed")
	case !readOnlyCall[method]:
		log.Info("CSI call done")
	}
	return resp, err
}

// readOnlyCall are the calls that change nothing, logged only when they
// fail: the sidecars and the kubelet make them often.
var readOnlyCall = map[string]bool{
	"Probe": true, "GetPluginInfo": true, "GetPluginCapabilities": true,
	"ControllerGetCapabilities": true, "NodeGetCapabilities": true, "NodeGetInfo": true,
	"ListVolumes": true, "ListSnapshots": true, "GetCapacity": true, "ValidateVolumeCapabilities": true,
	"NodeGetVolumeStats": true, "ControllerGetVolume": true,
}

// socketPath is the path of a unix:// endpoint.
func socketPath(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return "", fmt.Errorf("endpoint %q: must be unix:///path/to/csi.sock", endpoint)
	}
	path := u.Path
	if u.Host != "" {
		path = filepath.Join(u.Host, u.Path)
	}
	if path == "" {
		return "", fmt.Errorf("endpoint %q: no socket path", endpoint)
	}
	return path, nil
}
