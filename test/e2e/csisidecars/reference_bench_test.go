//go:build e2e

package csisidecars

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// referenceDriverName is the reference driver's name, its StorageClass's
// provisioner.
const referenceDriverName = "reference.csi.test"

// BenchmarkCSIProvisioningReference provisions 50 PVCs through the real
// external-provisioner and the driver until each is Bound, against the
// same 50 claims provisioned through a minimal reference driver written
// here (referenceDriver: a CreateVolume that answers at once and only
// records the volume), served on its own socket, with its own
// external-provisioner (the same binary and flags as the driver's,
// pointed at that socket) and a StorageClass naming it: the same
// PersistentVolume binder and the same provisioner code for both, so the
// ratio is the floor any driver can reach through the sidecars, where
// BenchmarkCSIProvisioning's is bound by the binder. Rounds are
// interleaved on one manager, reference, driver, reference, driver, each
// starting with no volume, after an unmeasured claim of each. It reports
// the ratio of the driver's rounds to the reference's (goal at most 1.3)
// and each side's time per volume: the round's time divided by 50, and
// the mean time from a claim's creation to its being Bound.
// LONGHORN_BENCH_PROVISIONER_FLAGS adds flags to both provisioners'; their
// logs are at -v=2, as a deployment runs them.
func BenchmarkCSIProvisioningReference(b *testing.B) {
	if testing.Short() {
		b.Skip("provisions 200 claims on the control plane: minutes; not with -short")
	}
	flags := append([]string{"-v=2"}, strings.Fields(os.Getenv("LONGHORN_BENCH_PROVISIONER_FLAGS"))...)
	s := newSidecarEnvWith(b, flags)
	b.Logf("both external-provisioners' flags beyond the tests' own: %v", flags)
	ref := serveReferenceDriver(b)
	startProvisioner(b, csiSidecars(b), s.NS, ref.sock, sidecarKubeconfig(b, s.Cluster), flags)
	sc := s.storageClass(b, "bench", map[string]string{})
	refSC := s.storageClassWith(b, "reference", map[string]string{}, func(sc *storagev1.StorageClass) { sc.Provisioner = referenceDriverName })
	bound := s.watchBound(b)

	var refs, drv []csiRound
	for i := 0; i < b.N; i++ {
		// One of each first, unmeasured: each provisioner's first claim
		// and the manager's first volume pay their caches' warm-up.
		s.claimRound(b, bound, refSC, fmt.Sprintf("rwarm%d", i), 1)
		s.claimRound(b, bound, sc, fmt.Sprintf("warm%d", i), 1)
		for r := 0; r < 2; r++ {
			refs = append(refs, s.claimRound(b, bound, refSC, fmt.Sprintf("r%d%d", i, r), csiBenchVolumes))
			drv = append(drv, s.claimRound(b, bound, sc, fmt.Sprintf("d%d%d", i, r), csiBenchVolumes))
		}
	}
	held, creates, deletes := ref.counts()
	if held != 0 {
		b.Fatalf("the reference driver still holds %d volumes after the rounds", held)
	}
	total := func(rounds []csiRound) (wall, mean time.Duration) {
		for _, r := range rounds {
			wall += r.wall
			mean += r.mean()
		}
		return wall / time.Duration(len(rounds)), mean / time.Duration(len(rounds))
	}
	refWall, refMean := total(refs)
	drvWall, drvMean := total(drv)
	ratio := drvWall.Seconds() / refWall.Seconds()
	b.Logf("%d claims: through the driver %s a round (%s), through the reference driver %s (%s): ratio %.2f (goal <= 1.3); per volume %s against %s, mean time to Bound %s against %s; the reference driver's CreateVolume calls %d, DeleteVolume calls %d (load average %s)",
		csiBenchVolumes, drvWall.Round(10*time.Millisecond), rounds(drv), refWall.Round(10*time.Millisecond), rounds(refs), ratio,
		(drvWall / csiBenchVolumes).Round(time.Millisecond), (refWall / csiBenchVolumes).Round(time.Millisecond),
		drvMean.Round(10*time.Millisecond), refMean.Round(10*time.Millisecond), creates, deletes, framework.LoadAverage())
	b.ReportMetric(ratio, "driver/reference")
	b.ReportMetric(drvWall.Seconds(), "driver-s/round")
	b.ReportMetric(refWall.Seconds(), "reference-s/round")
	b.ReportMetric(float64(drvWall.Milliseconds())/csiBenchVolumes, "driver-ms/volume")
	b.ReportMetric(float64(refWall.Milliseconds())/csiBenchVolumes, "reference-ms/volume")
	b.ReportMetric(float64(drvMean.Milliseconds()), "driver-mean-ms-to-bound")
	b.ReportMetric(float64(refMean.Milliseconds()), "reference-mean-ms-to-bound")
}

// referenceDriver is a minimal CSI driver, Identity and Controller
// services only: its CreateVolume answers at once with a volume of the
// size asked for and records it, its DeleteVolume forgets it, and it
// declares CREATE_DELETE_VOLUME and nothing else.
type referenceDriver struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedControllerServer
	sock string

	mu               sync.Mutex
	volumes          map[string]int64
	creates, deletes int
}

// serveReferenceDriver serves a referenceDriver on a socket of its own
// until the test ends.
func serveReferenceDriver(t testing.TB) *referenceDriver {
	t.Helper()
	// A unix socket's path is at most 107 bytes: t.TempDir's can be longer.
	dir, err := os.MkdirTemp("", "csi-reference-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &referenceDriver{sock: filepath.Join(dir, "csi.sock"), volumes: map[string]int64{}}
	lis, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	csipb.RegisterIdentityServer(srv, d)
	csipb.RegisterControllerServer(srv, d)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("the reference CSI driver stopped with %v", err)
		}
	})
	return d
}

// counts is how many volumes the driver holds and how many CreateVolume
// and DeleteVolume calls it has answered.
func (d *referenceDriver) counts() (held, creates, deletes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.volumes), d.creates, d.deletes
}

func (d *referenceDriver) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: referenceDriverName, VendorVersion: "0.0.0"}, nil
}

func (d *referenceDriver) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{Capabilities: []*csipb.PluginCapability{{
		Type: &csipb.PluginCapability_Service_{Service: &csipb.PluginCapability_Service{Type: csipb.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *referenceDriver) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{Ready: wrapperspb.Bool(true)}, nil
}

func (d *referenceDriver) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	return &csipb.ControllerGetCapabilitiesResponse{Capabilities: []*csipb.ControllerServiceCapability{{
		Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// CreateVolume records a volume of the name, of the size the request
// asks for (its required bytes, else its limit), the same again for the
// same name.
func (d *referenceDriver) CreateVolume(_ context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume name")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no volume capabilities")
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if size == 0 {
		size = req.GetCapacityRange().GetLimitBytes()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.creates++
	if have, ok := d.volumes[req.GetName()]; ok && have != size {
		return nil, status.Errorf(codes.AlreadyExists, "volume %s has %d bytes, not %d", req.GetName(), have, size)
	}
	d.volumes[req.GetName()] = size
	return &csipb.CreateVolumeResponse{Volume: &csipb.Volume{VolumeId: req.GetName(), CapacityBytes: size}}, nil
}

// DeleteVolume forgets the volume; one it does not hold is deleted
// already.
func (d *referenceDriver) DeleteVolume(_ context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume id")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deletes++
	delete(d.volumes, req.GetVolumeId())
	return &csipb.DeleteVolumeResponse{}, nil
}
