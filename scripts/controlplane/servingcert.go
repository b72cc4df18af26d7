package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// servingFiles are, under the apiserver's folder, the CA of its serving
// certificate (the one pods find as ca.crt in their token volume) and the
// certificate and key it serves with.
type servingFiles struct{ ca, caKey, cert, key string }

// kubernetesServiceNames are the names a pod calls the apiserver by
// through the kubernetes Service, as kubeadm puts them in its certificate.
var kubernetesServiceNames = []string{
	"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost",
}

// ensureServingCert makes, once, the CA of the apiserver's serving
// certificate, and issues the certificate at each start for ips (the
// addresses it is reached at) and kubernetesServiceNames. The CA is kept so
// that the ca.crt pods already have stays valid across restarts; the
// certificate is issued again so that its names follow the flags.
func ensureServingCert(dir string, ips []net.IP) (servingFiles, error) {
	f := servingFiles{
		ca: filepath.Join(dir, "serving-ca.crt"), caKey: filepath.Join(dir, "serving-ca.key"),
		cert: filepath.Join(dir, "serving.crt"), key: filepath.Join(dir, "serving.key"),
	}
	caCert, caKey, err := loadCA(f.ca, f.caKey)
	if errors.Is(err, os.ErrNotExist) {
		caCert, caKey, err = makeCA(f.ca, f.caKey, "longhorn-local-apiserver-ca")
	}
	if err != nil {
		return f, fmt.Errorf("the apiserver's serving CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return f, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  ips,
		DNSNames:     kubernetesServiceNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, caCert, &key.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return f, err
	}
	if err := writePEM(f.key, "EC PRIVATE KEY", keyDER); err != nil {
		return f, err
	}
	return f, writePEM(f.cert, "CERTIFICATE", der)
}

// makeCA writes a new self-signed CA, its key last: the key's presence
// says the pair is complete.
func makeCA(certPath, keyPath, name string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	return cert, key, writePEM(keyPath, "EC PRIVATE KEY", keyDER)
}

// loadCA reads the CA makeCA wrote; os.ErrNotExist when its key is not
// there.
func loadCA(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyBlock, _ := pem.Decode(keyPEM)
	certBlock, _ := pem.Decode(certPEM)
	if keyBlock == nil || certBlock == nil {
		return nil, nil, fmt.Errorf("%s or %s holds no PEM block", certPath, keyPath)
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	return cert, key, nil
}

// writePEM writes one PEM block, readable by its owner alone, atomically.
func writePEM(path, blockType string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// firstServiceIP is the kubernetes Service's cluster IP: the first address
// of the service range, which the apiserver gives it.
func firstServiceIP(serviceRange string) (net.IP, error) {
	_, ipNet, err := net.ParseCIDR(serviceRange)
	if err != nil {
		return nil, err
	}
	ip := ipNet.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("service range %s: IPv4 only", serviceRange)
	}
	first := append(net.IP{}, ip...)
	first[3]++
	return first, nil
}
