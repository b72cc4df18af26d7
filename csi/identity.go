package csi

import (
	"context"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type identityServer struct {
	csi.UnimplementedIdentityServer
	d *Driver
}

func (s *identityServer) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: s.d.opts.Version}, nil
}

func (s *identityServer) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	service := func(t csi.PluginCapability_Service_Type) *csi.PluginCapability {
		return &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}}
	}
	// A volume attaches only on the node that holds its replicas: the
	// volumes the driver makes say so (their PVs' node affinity).
	caps := []*csi.PluginCapability{service(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS)}
	if s.d.opts.Controller {
		caps = append(caps, service(csi.PluginCapability_Service_CONTROLLER_SERVICE))
		// A volume grows while attached and in use (its engine grows the
		// replicas, NodeExpandVolume the device and the filesystem).
		caps = append(caps, &csi.PluginCapability{Type: &csi.PluginCapability_VolumeExpansion_{
			VolumeExpansion: &csi.PluginCapability_VolumeExpansion{Type: csi.PluginCapability_VolumeExpansion_ONLINE}}})
	}
	return &csi.GetPluginCapabilitiesResponse{Capabilities: caps}, nil
}

// Probe says whether the manager's API answers: without it, the driver
// can do nothing.
func (s *identityServer) Probe(ctx context.Context, _ *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, probeBudget(ctx))
	defer cancel()
	_, err := s.d.api.Setting(ctx, "backup-target")
	return &csi.ProbeResponse{Ready: wrapperspb.Bool(err == nil)}, nil
}

// probeTimeout bounds a Probe: the client retries a manager that does not
// answer, and a probe must answer in time.
const probeTimeout = 5 * time.Second

// probeBudget is how long a Probe waits for the manager: probeTimeout, or
// less when the caller's deadline is nearer, so that the driver answers
// "not ready" before the caller gives up. A liveness check with a short
// timeout (--health-probe-timeout) must see a driver that answers, not a
// deadline, while the manager is away: restarting the driver would not
// bring the manager back.
func probeBudget(ctx context.Context) time.Duration {
	budget := probeTimeout
	if deadline, ok := ctx.Deadline(); ok {
		if left := time.Until(deadline) * 3 / 4; left < budget {
			budget = left
		}
	}
	return budget
}
