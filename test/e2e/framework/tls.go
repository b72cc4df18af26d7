package framework

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/mtls/mtlstest"
)

// ClusterIdentity is a leaf of the internal CA the namespace's managers
// made: what a Longhorn component holds, and a hostile pod does not.
func ClusterIdentity(t *testing.T, kube kubernetes.Interface, ns string) *mtls.Identity {
	t.Helper()
	return ClusterIdentityOf(t, kube, ns, mtls.RoleComponent)
}

// ClusterIdentityOf is ClusterIdentity for a leaf of role (mtls.RoleOf).
func ClusterIdentityOf(t *testing.T, kube kubernetes.Interface, ns, role string) *mtls.Identity {
	t.Helper()
	s, err := kube.CoreV1().Secrets(ns).Get(context.Background(), mtls.CASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the internal CA: %v", err)
	}
	a, err := mtls.DecodeBundle(s.Data[mtls.CAFile], s.Data[mtls.CAKeyFile])
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := a.IssueFor(time.Now(), role)
	if err != nil {
		t.Fatal(err)
	}
	return mtls.NewIdentity(leaf, a.Pool())
}

// HostileTransports are how a pod that reaches an internal port but holds
// no certificate of the cluster's CA may try to call it.
func HostileTransports(t *testing.T) map[string]*tls.Config {
	return map[string]*tls.Config{
		"plain":                   nil,
		"TLS without certificate": {InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // a hostile client
		"a certificate of its own CA": func() *tls.Config {
			c := mtlstest.Stranger(t).ClientConfig()
			c.VerifyConnection = nil // it would talk to any server
			return c
		}(),
	}
}

// RefusedOverGRPC calls a gRPC service at addr with each hostile
// transport and expects every call refused.
func RefusedOverGRPC(t *testing.T, service, addr string, call func(ctx context.Context, conn *grpc.ClientConn) error) {
	t.Helper()
	for name, cfg := range HostileTransports(t) {
		creds := insecure.NewCredentials()
		if cfg != nil {
			creds = credentials.NewTLS(cfg)
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = call(ctx, conn)
		cancel()
		conn.Close()
		if err == nil {
			t.Errorf("%s at %s answered a client with %s", service, addr, name)
		}
	}
}
