package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// ServerName is the DNS name every leaf carries and every caller checks.
// Servers are dialled by pod IP, so a name shared by all components is
// what proves the peer is one of them.
const ServerName = "longhorn-internal"

// Lifetimes. A CA lives ten years and is replaced when two are left; a
// leaf lives 60 days and is renewed when 20 are left, so a server whose
// leaf is renewed through a mounted Secret (which the kubelet refreshes
// within minutes) never serves an expired one.
const (
	CALifetime      = 10 * 365 * 24 * time.Hour
	CARotateBefore  = 2 * 365 * 24 * time.Hour
	CAUsableAfter   = 24 * time.Hour
	LeafLifetime    = 60 * 24 * time.Hour
	LeafRenewBefore = 20 * 24 * time.Hour
	// clockSkew backdates a certificate so a peer whose clock is a little
	// behind accepts it at once.
	clockSkew = 5 * time.Minute
)

// CA is one certificate authority and its key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Authority is the cluster's trust bundle: its CAs, newest first. Every
// CA in it is trusted; one signs (see Signer).
type Authority struct {
	CAs []CA
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func keyID(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return sum[:20], nil
}

// NewCA makes a self-signed CA valid from now for CALifetime.
func NewCA(now time.Time) (CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return CA{}, err
	}
	sn, err := serial()
	if err != nil {
		return CA{}, err
	}
	id, err := keyID(key.Public())
	if err != nil {
		return CA{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "longhorn-internal-ca@" + now.UTC().Format("2006-01-02T15:04:05.000000000Z")},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CALifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		SubjectKeyId:          id,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return CA{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return CA{}, err
	}
	return CA{Cert: cert, Key: key}, nil
}

// Rotate drops expired CAs and adds a new one when there is none, or
// when the newest has less than CARotateBefore left. It says whether the
// bundle changed.
func (a *Authority) Rotate(now time.Time) (bool, error) {
	changed := false
	kept := a.CAs[:0]
	for _, ca := range a.CAs {
		if now.Before(ca.Cert.NotAfter) {
			kept = append(kept, ca)
		} else {
			changed = true
		}
	}
	a.CAs = kept
	if len(a.CAs) > 0 && a.CAs[0].Cert.NotAfter.Sub(now) >= CARotateBefore {
		return changed, nil
	}
	ca, err := NewCA(now)
	if err != nil {
		return changed, err
	}
	a.CAs = append([]CA{ca}, a.CAs...)
	return true, nil
}

// Signer is the CA that signs leaves now: the newest that has been in
// the bundle for CAUsableAfter, so every peer trusts it before it meets
// a leaf it signed; the only one when there is one.
func (a *Authority) Signer(now time.Time) (CA, error) {
	if len(a.CAs) == 0 {
		return CA{}, errors.New("the internal CA bundle is empty")
	}
	for _, ca := range a.CAs {
		if !now.Before(ca.Cert.NotBefore.Add(clockSkew + CAUsableAfter)) {
			return ca, nil
		}
	}
	return a.CAs[len(a.CAs)-1], nil
}

// Pool is every CA of the bundle, to verify peers with.
func (a *Authority) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	for _, ca := range a.CAs {
		pool.AddCert(ca.Cert)
	}
	return pool
}

// Issue signs a leaf for ServerName, good for serving and calling, valid
// for LeafLifetime or until its signer expires: a Longhorn component's.
func (a *Authority) Issue(now time.Time) (tls.Certificate, error) {
	return a.IssueFor(now, RoleComponent)
}

// IssueFor is Issue for a leaf of role (see RoleOf), which the servers
// that answer it judge.
func (a *Authority) IssueFor(now time.Time, role string) (tls.Certificate, error) {
	signer, err := a.Signer(now)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	sn, err := serial()
	if err != nil {
		return tls.Certificate{}, err
	}
	notAfter := now.Add(LeafLifetime)
	if signer.Cert.NotAfter.Before(notAfter) {
		notAfter = signer.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: ServerName, OrganizationalUnit: roleUnits(role)},
		DNSNames:     []string{ServerName},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, key.Public(), signer.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// NeedsRenewal says whether leaf should be replaced now: it is near its
// end, or no CA of the bundle verifies it any more.
func (a *Authority) NeedsRenewal(leaf *x509.Certificate, now time.Time) bool {
	if leaf == nil || leaf.NotAfter.Sub(now) < LeafRenewBefore {
		return true
	}
	_, err := leaf.Verify(x509.VerifyOptions{Roots: a.Pool(), DNSName: ServerName, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}})
	return err != nil
}

// EncodeBundle is the bundle as PEM: the certificates (ca.crt) and the
// keys (ca.key), newest first.
func (a *Authority) EncodeBundle() (certs, keys []byte, err error) {
	for _, ca := range a.CAs {
		certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})...)
		der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
	}
	return certs, keys, nil
}

// DecodeBundle reads a bundle EncodeBundle wrote. Every certificate must
// be a CA and have its key, or the bundle is refused: a Secret someone
// edited by hand fails loudly rather than signing with the wrong key.
func DecodeBundle(certsPEM, keysPEM []byte) (*Authority, error) {
	certs, err := ParseCertificates(certsPEM)
	if err != nil {
		return nil, fmt.Errorf("ca.crt: %w", err)
	}
	var keys []crypto.Signer
	for rest := keysPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ca.key: %w", err)
		}
		signer, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("ca.key: a %T cannot sign", k)
		}
		keys = append(keys, signer)
	}
	a := &Authority{}
	for _, cert := range certs {
		if !cert.IsCA {
			return nil, fmt.Errorf("ca.crt: %q is not a CA", cert.Subject.CommonName)
		}
		var key crypto.Signer
		for _, k := range keys {
			if samePublicKey(k.Public(), cert.PublicKey) {
				key = k
				break
			}
		}
		if key == nil {
			return nil, fmt.Errorf("ca.key: no key for the CA %q", cert.Subject.CommonName)
		}
		a.CAs = append(a.CAs, CA{Cert: cert, Key: key})
	}
	if len(a.CAs) == 0 {
		return nil, errors.New("ca.crt: no certificate")
	}
	return a, nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}

// ParseCertificates reads every CERTIFICATE block of PEM data.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		out = append(out, cert)
	}
	if len(out) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return out, nil
}

// EncodeLeaf is a leaf as PEM: tls.crt and tls.key.
func EncodeLeaf(cert tls.Certificate) (certPEM, keyPEM []byte, err error) {
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	der, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	return certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
