package mtls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Identity is what one component presents and trusts: its leaf and the
// CA bundle. It changes in place when the leaf is renewed or the bundle
// rotated, so connections made later use the new material while servers
// and clients built once keep working.
type Identity struct {
	mu     sync.RWMutex
	cert   *tls.Certificate
	pool   *x509.CertPool
	now    func() time.Time
	reload func() // refreshes the material from its source, if any
}

// NewIdentity holds cert and trusts pool.
func NewIdentity(cert tls.Certificate, pool *x509.CertPool) *Identity {
	id := &Identity{now: time.Now}
	id.Set(cert, pool)
	return id
}

// Set replaces the leaf and the trusted CAs.
func (id *Identity) Set(cert tls.Certificate, pool *x509.CertPool) {
	id.mu.Lock()
	defer id.mu.Unlock()
	id.cert, id.pool = &cert, pool
}

func (id *Identity) current() (*tls.Certificate, *x509.CertPool) {
	if id.reload != nil {
		id.reload()
	}
	id.mu.RLock()
	defer id.mu.RUnlock()
	return id.cert, id.pool
}

// Leaf is the certificate presented now.
func (id *Identity) Leaf() *x509.Certificate {
	cert, _ := id.current()
	return cert.Leaf
}

// verify checks a peer's chain against the CAs trusted now. The name is
// checked for both ends: every leaf of the cluster CA carries it.
func (id *Identity) verify(chain []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("mutual TLS: the peer sent no certificate")
	}
	_, pool := id.current()
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: ServerName,
		CurrentTime: id.now(), KeyUsages: []x509.ExtKeyUsage{usage}})
	if err != nil {
		return fmt.Errorf("mutual TLS: the peer's certificate is not one of the cluster's internal CA: %w", err)
	}
	return nil
}

// ServerConfig serves with the current leaf and requires a client
// certificate of the cluster CA. The standard library's verification
// would pin the CA pool at build time; this verifies against the pool of
// the moment, so a rotated bundle applies to the next handshake.
func (id *Identity) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, _ := id.current()
			return cert, nil
		},
		ClientAuth: tls.RequireAnyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return id.verify(cs.PeerCertificates, x509.ExtKeyUsageClientAuth)
		},
	}
}

// ClientConfig presents the current leaf and accepts only a server with
// a leaf of the cluster CA. The standard check is off only to be replaced
// by VerifyConnection, which checks the chain and the name against the
// pool of the moment.
func (id *Identity) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: ServerName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := id.current()
			return cert, nil
		},
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			return id.verify(cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
		},
	}
}

// GRPCServerOption makes a gRPC server require mutual TLS.
func (id *Identity) GRPCServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(id.ServerConfig()))
}

// GRPCDialOption makes a gRPC client speak mutual TLS.
func (id *Identity) GRPCDialOption() grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(id.ClientConfig()))
}

// HTTPClient is a client of HTTPS servers of the cluster CA; its
// requests are bounded by the caller's context, not by the client.
func (id *Identity) HTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = id.ClientConfig()
	// Internal servers are dialled by IP, never through a proxy.
	t.Proxy = nil
	return &http.Client{Transport: t}
}
