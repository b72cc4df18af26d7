package csi

import (
	"context"
	"fmt"
	"net"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// ProbeSocket calls the Identity service's Probe on the driver's own
// endpoint (unix:///path/csi.sock), as the kubelet's and the sidecars'
// clients reach it: the registration waits for it, the liveness endpoint
// answers with it. It says whether the driver answered and, if it did,
// whether it reports itself ready (an unset ready is ready, as the CSI
// spec has it). ctx bounds the whole call.
func ProbeSocket(ctx context.Context, endpoint string) (ready bool, err error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return false, err
	}
	conn, err := grpc.NewClient("passthrough:///"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		return false, fmt.Errorf("connect to the CSI socket %s: %w", path, err)
	}
	defer conn.Close()
	resp, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return false, fmt.Errorf("probe the CSI socket %s: %w", path, err)
	}
	return resp.GetReady() == nil || resp.GetReady().GetValue(), nil
}
