package mtls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// A leaf's role, in its subject's organizational unit: what the holder
// is, for the servers that answer it to judge. Every leaf of the CA is a
// Longhorn component's and may call anything, except a leaf of a narrower
// role: a backing image data source's, which fetches untrusted URLs and
// is answered only what exporting a volume's snapshot needs.
const (
	// RoleComponent is a manager's or a backing image manager's leaf: no
	// unit.
	RoleComponent = ""
	// RoleDataSource is a backing image data source's leaf.
	RoleDataSource = "backing-image-data-source"
)

func roleUnits(role string) []string {
	if role == RoleComponent {
		return nil
	}
	return []string{role}
}

// RoleOf is the role of a leaf; a leaf of several units, which this CA
// never signs, is of the first.
func RoleOf(cert *x509.Certificate) string {
	if cert == nil || len(cert.Subject.OrganizationalUnit) == 0 {
		return RoleComponent
	}
	return cert.Subject.OrganizationalUnit[0]
}

// PeerRole is the role of the certificate of a gRPC call's peer, and
// whether there was one. The handshake verified it already (ServerConfig
// checks the chain in VerifyConnection, so the standard library leaves
// VerifiedChains empty): a connection exists only for a leaf of the CA.
func PeerRole(ctx context.Context) (string, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return "", false
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return "", false
	}
	return RoleOf(info.State.PeerCertificates[0]), true
}

// RoleGuard is the gRPC server options that answer a caller of a narrower
// role than a component's only the methods allowed lists for its role
// (full method names), PermissionDenied naming the role otherwise. A
// component's leaf, and a call with no verified certificate (which the
// TLS layer refuses first wherever mutual TLS is on), pass.
func RoleGuard(allowed map[string]map[string]bool) []grpc.ServerOption {
	check := func(ctx context.Context, method string) error {
		role, ok := PeerRole(ctx)
		if !ok || role == RoleComponent || allowed[role][method] {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "a %s certificate may not call %s", role, method)
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if err := check(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			if err := check(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return handler(srv, ss)
		}),
	}
}

// ComponentsOnly answers 403 to an HTTPS caller whose leaf is of a
// narrower role than a component's: the servers behind it are called by
// managers and backing image managers only.
func ComponentsOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			if role := RoleOf(r.TLS.PeerCertificates[0]); role != RoleComponent {
				http.Error(w, "a "+role+" certificate may not call this server", http.StatusForbidden)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// ComponentsOnlyTLS makes a server's config refuse, at the handshake, a
// peer whose leaf is of a narrower role than a component's (a backing
// image data source's, which fetches untrusted URLs): for servers whose
// every request is a component's, such as the replica protocol's.
func ComponentsOnlyTLS(config *tls.Config) *tls.Config {
	verify := config.VerifyConnection
	config.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) > 0 {
			if role := RoleOf(cs.PeerCertificates[0]); role != RoleComponent {
				return fmt.Errorf("a %s certificate may not call this server", role)
			}
		}
		return nil
	}
	return config
}
