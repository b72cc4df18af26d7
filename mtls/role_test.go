package mtls_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// A leaf of a narrow role is answered only the methods its role may call,
// over real mutual TLS; a component's leaf is answered everything.
func TestRoleGuard(t *testing.T) {
	auth := mtlstest.Authority(t)
	server := mtlstest.IdentityOf(t, auth)
	g := grpc.NewServer(append(mtls.RoleGuard(map[string]map[string]bool{
		mtls.RoleDataSource: {healthpb.Health_Check_FullMethodName: true},
	}), server.GRPCServerOption())...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)

	leafOf := func(role string) *mtls.Identity {
		cert, err := auth.IssueFor(time.Now(), role)
		if err != nil {
			t.Fatal(err)
		}
		if got := mtls.RoleOf(cert.Leaf); got != role {
			t.Fatalf("a leaf issued for %q is of role %q", role, got)
		}
		return mtls.NewIdentity(cert, auth.Pool())
	}
	call := func(id *mtls.Identity) (check, watch codes.Code) {
		conn, err := grpc.NewClient(lis.Addr().String(), id.GRPCDialOption())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		c := healthpb.NewHealthClient(conn)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = c.Check(ctx, &healthpb.HealthCheckRequest{})
		check = status.Code(err)
		stream, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		return check, status.Code(err)
	}
	if check, watch := call(leafOf(mtls.RoleComponent)); check != codes.OK || watch != codes.OK {
		t.Errorf("a component's leaf: Check %v, Watch %v", check, watch)
	}
	if check, watch := call(leafOf(mtls.RoleDataSource)); check != codes.OK || watch != codes.PermissionDenied {
		t.Errorf("a data source's leaf: Check %v (allowed), Watch %v (not allowed)", check, watch)
	}
	if check, watch := call(leafOf("something-else")); check != codes.PermissionDenied || watch != codes.PermissionDenied {
		t.Errorf("a leaf of an unknown role: Check %v, Watch %v", check, watch)
	}
}
