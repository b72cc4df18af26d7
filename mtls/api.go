package mtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/types"
)

// CAConfigMapName holds the internal CA bundle's certificates alone
// (ca.crt), no key: what the API's clients in pods (the recurring-job
// CronJob pods, the CSI driver) mount to check the API's certificate, as
// kube-root-ca.crt serves the apiserver's.
const CAConfigMapName = "longhorn-internal-ca-cert"

// APIServerConfig serves the manager's API over TLS with this manager's
// current leaf. Callers authenticate with bearer tokens, not certificates,
// so none is asked for.
func (id *Identity) APIServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, _ := id.current()
			return cert, nil
		},
	}
}

// APIClientConfig is the TLS of a client of the manager's API: the
// server must present a leaf of a manager (RoleComponent, not a data
// source's narrower one) that the CA bundle in caFile verifies. caFile is
// read again when it changes (a mounted ConfigMap follows a rotation).
func APIClientConfig(caFile string) *tls.Config {
	pools := &caFilePool{path: caFile}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         ServerName,
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			pool, err := pools.get()
			if err != nil {
				return err
			}
			return verifyAPIServer(cs.PeerCertificates, pool)
		},
	}
}

// APIClientConfigOf is APIClientConfig trusting the CA bundle of id (the
// manager's calls to its own API).
func APIClientConfigOf(id *Identity) *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         ServerName,
		InsecureSkipVerify: true, //nolint:gosec // verified in VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := id.current()
			return verifyAPIServer(cs.PeerCertificates, pool)
		},
	}
}

func verifyAPIServer(chain []*x509.Certificate, pool *x509.CertPool) error {
	if len(chain) == 0 {
		return errors.New("the manager's API sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: ServerName,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		return fmt.Errorf("the manager's API presented a certificate the cluster's internal CA does not verify: %w", err)
	}
	if role := RoleOf(chain[0]); role != RoleComponent {
		return fmt.Errorf("the manager's API presented a certificate of role %q, not a manager's", role)
	}
	return nil
}

// caFilePool is the pool of the CA bundle in a file, read again when the
// file's content changes.
type caFilePool struct {
	path string
	mu   sync.Mutex
	data []byte
	pool *x509.CertPool
}

func (p *caFilePool) get() (*x509.CertPool, error) {
	data, err := os.ReadFile(p.path)
	if err != nil {
		return nil, fmt.Errorf("read the internal CA bundle that checks the manager's API: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool != nil && bytes.Equal(data, p.data) {
		return p.pool, nil
	}
	certs, err := ParseCertificates(data)
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("the internal CA bundle %s holds no certificate: %v", p.path, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	p.data, p.pool = data, pool
	return pool, nil
}

// syncCAConfigMap keeps CAConfigMapName holding caPEM.
func (k *Keeper) syncCAConfigMap(ctx context.Context, caPEM []byte) error {
	maps := k.Kube.CoreV1().ConfigMaps(k.Namespace)
	cm, err := maps.Get(ctx, CAConfigMapName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = maps.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: CAConfigMapName, Namespace: k.Namespace,
				Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
			Data: map[string]string{CAFile: string(caPEM)},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // another manager made it; the next sync checks it
		}
	case err != nil:
		return err
	case cm.Data[CAFile] == string(caPEM):
		return nil
	default:
		cm.Data = map[string]string{CAFile: string(caPEM)}
		_, err = maps.Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	k.Log.WithField("configMap", CAConfigMapName).Info("Published the internal CA's certificates for the API's clients")
	return nil
}
